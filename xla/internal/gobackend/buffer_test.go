package gobackend

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestBuffersOnDevices: buffers carry their virtual device; a copy to another device is
// independent storage; finalizing twice is a no-op, and any other use after finalizing is an
// error, not a use after free; buffers of another backend are refused by name.
func TestBuffersOnDevices(t *testing.T) {
	gb := newGotpu(t, Config{NumDevices: 3})
	s := shapes.Make(dtypes.Float32, 4)
	b1, err := gb.BufferFromFlatData(1, []float32{1, 2, 3, 4}, s)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := gb.BufferDeviceNum(b1); err != nil || d != 1 {
		t.Fatalf("device %d, %v; want 1", d, err)
	}
	b2, err := gb.BufferCopyToDevice(b1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := gb.BufferDeviceNum(b2); d != 2 {
		t.Fatalf("copy on device %d, want 2", d)
	}
	data, err := gb.BufferData(b1)
	if err != nil {
		t.Fatal(err)
	}
	data.([]float32)[0] = 100
	if got := flat(t, gb, b2); got[0] != 1 {
		t.Errorf("the copy follows the original: %v", got)
	}
	shared, sflat, err := gb.NewSharedBuffer(2, s)
	if err != nil {
		t.Fatal(err)
	}
	copy(sflat.([]float32), []float32{5, 6, 7, 8})
	if got := flat(t, gb, shared); got[3] != 8 {
		t.Errorf("shared buffer reads %v", got)
	}
	for _, b := range []any{b1, b2, shared} {
		if err := gb.BufferFinalize(b); err != nil {
			t.Fatal(err)
		}
		if err := gb.BufferFinalize(b); err != nil {
			t.Errorf("second finalize: %v", err)
		}
	}
	if _, err := gb.BufferShape(b1); err == nil || !strings.Contains(err.Error(), "finalized") {
		t.Errorf("shape of a finalized buffer: %v", err)
	}
	if _, err := gb.BufferCopyToDevice(b2, 0); err == nil {
		t.Error("copied a finalized buffer")
	}
	if _, err := gb.BufferCopyToDevice(shared, 3); err == nil || !strings.Contains(err.Error(), "device 3") {
		t.Errorf("copy to device 3 of 3: %v", err)
	}
	if _, _, err := gb.NewSharedBuffer(-1, s); err == nil {
		t.Error("a shared buffer on device -1")
	}
	sg := newSimpleGo(t)
	foreign, _ := sg.BufferFromFlatData(0, []float32{1}, shapes.Make(dtypes.Float32, 1))
	if _, err := gb.BufferShape(foreign); err == nil || !strings.Contains(err.Error(), "not a buffer of the gotpu backend") {
		t.Errorf("a simplego buffer: %v", err)
	}
	if err := gb.BufferFinalize(foreign); err == nil {
		t.Error("finalized a simplego buffer")
	}
}
