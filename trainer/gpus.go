package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// GPUs are shared: a job (or a start) may ask for GPUs, and the run gets
// free ones, chosen and locked host-wide by a GPUAllocator (cmd wires the
// gpu package's, with internal/gpulock's lock files) before the run is
// recorded; the locks go to the run's supervisor, which holds them for the
// run's whole life as it holds the job's lock. A request that cannot be
// met now is a *BusyError with GPUs set (what holds each GPU), which the
// chat offers to queue; the queue tries again while GPUs may free up.

// GPURequest is what a run asks of the host's GPUs. The zero value asks
// for none: the run starts as before, with the environment the job gives.
type GPURequest struct {
	// Count is how many GPUs; with Indices, len(Indices).
	Count int `json:"count,omitempty"`
	// Memory is the free memory each must have, in bytes; 0: any.
	Memory int64 `json:"memory,omitempty"`
	// Indices are exactly these GPUs (NVML indices); nil: any free ones.
	Indices []int `json:"indices,omitempty"`
}

// Zero reports whether r asks for no GPU.
func (r GPURequest) Zero() bool { return r.Count == 0 && len(r.Indices) == 0 }

// N is the number of GPUs asked for.
func (r GPURequest) N() int {
	if len(r.Indices) > 0 {
		return len(r.Indices)
	}
	return r.Count
}

// MaxGPUs bounds a request.
const MaxGPUs = 64

// The start parameters that override a job's GPU request from the chat:
// gpus=N (how many) and gpu=I or gpu=I,J (exactly these). A job whose own
// parameter has one of these names keeps it as its parameter.
const (
	ParamGPUs = "gpus"
	ParamGPU  = "gpu"
)

// ParseGPUCount reads gpus=N.
func ParseGPUCount(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > MaxGPUs {
		return 0, fmt.Errorf("want a number of GPUs from 1 to %d, got %q", MaxGPUs, s)
	}
	return n, nil
}

// ParseGPUIndices reads gpu=3 or gpu=0,3: distinct NVML indices.
func ParseGPUIndices(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 || i >= 1024 {
			return nil, fmt.Errorf("want GPU indices like 3 or 0,3 (as 显卡 lists them), got %q", s)
		}
		if slices.Contains(out, i) {
			return nil, fmt.Errorf("GPU %d is named twice in %q", i, s)
		}
		out = append(out, i)
	}
	if len(out) > MaxGPUs {
		return nil, fmt.Errorf("at most %d GPUs, got %d", MaxGPUs, len(out))
	}
	return out, nil
}

// isGPUParam reports whether name is a start's gpus= or gpu= for j (a
// job's own parameter of that name is its own).
func (j *Job) isGPUParam(name string) bool {
	if _, own := j.Params[name]; own {
		return false
	}
	return name == ParamGPUs || name == ParamGPU
}

// gpuParamError checks a start's gpus= or gpu= value.
func (j *Job) gpuParamError(name, v string) *ParamError {
	var err error
	spec := fmt.Sprintf("gpus=N: how many GPUs, 1 to %d", MaxGPUs)
	if name == ParamGPUs {
		_, err = ParseGPUCount(v)
	} else {
		_, err = ParseGPUIndices(v)
		spec = "gpu=3 or gpu=0,3: the GPUs as 显卡 lists them"
	}
	if err == nil {
		return nil
	}
	return &ParamError{Job: j.Name, Param: name, Value: v, Given: true, Reason: "asks for no GPU: " + err.Error(), Problem: ParamNoGPU, Spec: spec}
}

// gpuRequest is the job's request with the start's gpus= or gpu= over it
// (ResolveParams has checked them).
func (j *Job) gpuRequest(params map[string]string) GPURequest {
	req := j.GPUs
	if v, ok := params[ParamGPUs]; ok && j.isGPUParam(ParamGPUs) {
		if n, err := ParseGPUCount(v); err == nil {
			req.Count, req.Indices = n, nil
		}
	}
	if v, ok := params[ParamGPU]; ok && j.isGPUParam(ParamGPU) {
		if ix, err := ParseGPUIndices(v); err == nil {
			req.Count, req.Indices = len(ix), ix
		}
	}
	return req
}

// RunGPU is one GPU a run was given.
type RunGPU struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name,omitempty"`
}

// GPUList is "0,3": the indices of gpus.
func GPUList(gpus []RunGPU) string {
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = strconv.Itoa(g.Index)
	}
	return strings.Join(parts, ",")
}

// GPUHolder is what a claim writes of its run into the GPUs' locks: its job.
type GPUHolder struct {
	Job string
}

// GPUClaim is GPUs chosen and locked for one run.
type GPUClaim struct {
	GPUs []RunGPU
	// Env is what the run's environment gets: CUDA_DEVICE_ORDER and
	// CUDA_VISIBLE_DEVICES.
	Env []string
	// Locks are the GPUs' lock files, locked: they go to the run's
	// supervisor (Start closes them here).
	Locks []*os.File
	// Record writes the run's id into the locks once it is recorded,
	// before they go to its supervisor (which writes its main process);
	// nil when there is nothing to record.
	Record func(run int64)
}

// close releases the claim's locks (a start that did not happen).
func (c *GPUClaim) close() {
	for _, f := range c.Locks {
		if f != nil {
			f.Close()
		}
	}
	c.Locks = nil
}

// GPUAllocator chooses and locks GPUs for runs.
type GPUAllocator interface {
	// Claim picks GPUs that meet req — free for the configured time, not
	// held by any trainbot run on this host — and locks them. A request
	// that cannot be met now is a *GPUShortage; one that can never be met
	// on this host (no GPUs, fewer than asked, an index that does not
	// exist) wraps ErrNoGPUs.
	Claim(ctx context.Context, req GPURequest, h GPUHolder) (*GPUClaim, error)
}

// ErrNoGPUs is wrapped by the error of a GPU request this host can never
// meet.
var ErrNoGPUs = errors.New("no such GPUs on this host")

// GPUShortage is a GPU request that cannot be met now. Cause says why,
// as the allocator's facts (gpu.BusyError for the real one: each GPU with
// what holds it), which the chat words (render.GPURefusal).
type GPUShortage struct {
	Want  GPURequest
	Cause error
}

func (e *GPUShortage) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("%d GPU(s) wanted, not free now", e.Want.N())
	}
	return e.Cause.Error()
}

// Unwrap is the cause.
func (e *GPUShortage) Unwrap() error { return e.Cause }
