package push

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	_ "image/png" // charts are PNGs

	"golang.org/x/image/draw"
)

// fitImage returns the image as is when it is at most limit bytes, else
// re-encoded as JPEG, then scaled down by half until it fits (at most three
// times); an error when it still does not.
func fitImage(data []byte, limit int) ([]byte, error) {
	if len(data) <= limit {
		return data, nil
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%d bytes, over the %d-byte limit, and not an image that can be re-encoded: %w", len(data), limit, err)
	}
	for i := 0; i < 4; i++ {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 85}); err != nil {
			return nil, err
		}
		if b.Len() <= limit {
			return b.Bytes(), nil
		}
		r := img.Bounds()
		if r.Dx() < 64 || r.Dy() < 64 {
			break
		}
		small := image.NewRGBA(image.Rect(0, 0, r.Dx()/2, r.Dy()/2))
		draw.ApproxBiLinear.Scale(small, small.Bounds(), img, r, draw.Src, nil)
		img = small
	}
	return nil, errors.New("too large even scaled down")
}
