package fleetsim

import "testing"

// TestLagOf: the median and the most of the samples, in any order, and
// nothing of none.
func TestLagOf(t *testing.T) {
	for _, tc := range []struct {
		samples []uint64
		want    Lag
	}{
		{nil, Lag{}},
		{[]uint64{7}, Lag{P50: 7, Max: 7, Samples: 1}},
		{[]uint64{90, 0, 3000, 12, 5}, Lag{P50: 12, Max: 3000, Samples: 5}},
		{[]uint64{4, 1, 3, 2}, Lag{P50: 3, Max: 4, Samples: 4}},
	} {
		in := append([]uint64(nil), tc.samples...)
		if got := lagOf(tc.samples); got != tc.want {
			t.Errorf("lagOf(%v) = %+v, want %+v", in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.samples[i] {
				t.Errorf("lagOf reordered its samples: %v, was %v", tc.samples, in)
			}
		}
	}
}
