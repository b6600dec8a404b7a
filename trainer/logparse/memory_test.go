package logparse

import "testing"

// Memory printed with a byte unit on a name that says memory is a point in
// bytes (issue 18's lines, as trainbot parse met them).
func TestMemoryInBytes(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "the seed's memory line, in MB",
			lines: []string{"step 3 loss=0.5", "Memory: 14222.125 MB"},
			want:  []string{"3 - loss=0.5", "3 - memory=1.4222125e+10"}},
		{name: "torchvision's bare max mem is MB by its convention",
			lines: []string{"Epoch: [0]  [ 10/100]  eta: 0:01:00  lr: 0.1  loss: 2.3 (2.4)  max mem: 3021"},
			want:  []string{"10 0 lr=0.1", "10 0 loss=2.3", "10 0 max_mem=3.167748096e+09"}},
		{name: "a bare number on another memory name stays as printed",
			lines: []string{"Epoch [1][50/500]\tlr: 1.000e-02, memory: 3000, loss: 1.2"},
			want:  []string{"50 1 lr=0.01", "50 1 memory=3000", "50 1 loss=1.2"}},
		{name: "DeepSpeed's allocated memory, glued units",
			lines: []string{"steps: 10 loss: 0.5", "MA 1.2 GB         Max_MA 1.5 GB", "[Rank 0] MemAllocated=3.2GB MaxMemAllocated=4.1GB"},
			want:  []string{"10 - loss=0.5", "10 - memallocated=3.2e+09", "10 - maxmemallocated=4.1e+09"}},
		{name: "a name and a size after a space, binary units",
			lines: []string{"step 7 loss=0.25 gpu_mem 14.2 GiB"},
			want:  []string{"7 - loss=0.25", "7 - gpu_mem=1.52471339008e+10"}},
		{name: "detectron2 and torchtitan",
			lines: []string{"iter: 19  total_loss: 1.5  max_mem: 2433M", "step: 20  loss: 1.4  memory: 1.41GiB(1.79%)"},
			want:  []string{"19 - total_loss=1.5", "19 - max_mem=2.433e+09", "20 - loss=1.4", "20 - memory=1.51397597184e+09"}},
		{name: "sizes on other names are not metrics",
			lines: []string{"step 1 loss=1 size: 3 MB cache: 2 GiB"},
			want:  []string{"1 - loss=1"}},
	})
}

func TestIsMemoryName(t *testing.T) {
	for name, want := range map[string]bool{"memory": true, "max_mem": true, "gpu_mem": true, "MemAllocated": true,
		"max_mem_reserved": true, "loss": false, "lr": false, "accuracy": false} {
		if got := IsMemoryName(name); got != want {
			t.Errorf("IsMemoryName(%q) = %v, want %v", name, got, want)
		}
	}
}
