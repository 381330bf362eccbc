package reconcile

import (
	"context"
	"reflect"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
)

// TestBeforeChange: the caller is told before the first thing a reconcile
// changes, with no Helm call made yet, and not at all when the release is
// in sync, so it can hold back its "in progress" status write for a
// reconcile that only checks.
func TestBeforeChange(t *testing.T) {
	cases := []struct {
		name string
		// change is made after a first reconcile installed the release.
		change func(*harness)
		// want is the Helm calls made before each BeforeChange.
		want      []int
		wantCalls []string
	}{
		{name: "in sync", change: func(*harness) {}, want: nil},
		{name: "new values", change: func(h *harness) { h.values = map[string]any{"replicas": 2} },
			want: []int{0}, wantCalls: []string{"upgrade"}},
		{name: "left pending by a stop", change: func(h *harness) {
			h.helm.last().Info.Status = common.StatusPendingUpgrade
		}, want: []int{0, 1}, wantCalls: []string{"unlock", "upgrade"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := installedHarness(t)
			tc.change(h)
			var got []int
			m := &Machine{Helm: h.helm, Recorder: h.recorder, BeforeChange: func() {
				got = append(got, len(h.helm.calls))
			}}
			if err := m.Run(context.Background(), h.request()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BeforeChange after %v Helm calls, want %v", got, tc.want)
			}
			wantCalls(t, h, tc.wantCalls...)
		})
	}
}
