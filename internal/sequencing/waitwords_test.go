package sequencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// wordingKube is fakeKube whose waiter fails for the object named
// notReady as the controller's waiter does (helmclient's, which words
// Helm's error as a kubewait.WaitError): at once when stalled, else when
// its timeout ends.
type wordingKube struct {
	*fakeKube
	notReady string
	stalled  bool
}

func (k *wordingKube) GetWaiterWithOptions(kube.WaitStrategy, ...kube.WaitOption) (kube.Waiter, error) {
	return wordingWaiter{fakeWaiter: fakeWaiter{f: k.fakeKube}, k: k}, nil
}

type wordingWaiter struct {
	fakeWaiter
	k *wordingKube
}

func (w wordingWaiter) Wait(list kube.ResourceList, timeout time.Duration) error {
	w.f.record("wait", list)
	for _, info := range list {
		if info.Name != w.k.notReady {
			continue
		}
		if w.k.stalled {
			return kubewait.FromHelm(errors.Join(
				fmt.Errorf("resource ConfigMap/%s/%s not ready. status: Failed, message: broken\nfor good", info.Namespace, info.Name)))
		}
		time.Sleep(timeout)
		return kubewait.FromHelm(errors.Join(
			fmt.Errorf("resource ConfigMap/%s/%s not ready. status: InProgress, message: not yet", info.Namespace, info.Name),
			context.DeadlineExceeded))
	}
	return nil
}

func (w wordingWaiter) WaitWithJobs(list kube.ResourceList, timeout time.Duration) error {
	return w.Wait(list, timeout)
}

// TestFailedBatchWaitSaysUpstreamsWords: an ordered action whose batch
// wait fails says so on one line that starts with upstream's words for a
// failed wait, and names the resource group and what ran out after them.
func TestFailedBatchWaitSaysUpstreamsWords(t *testing.T) {
	tests := []struct {
		name    string
		stalled bool
		want    string
	}{
		{
			name: "the batch's readiness timeout ran out",
			want: "timeout waiting for: [ConfigMap/ns/migrate status: 'InProgress'] " +
				"(timed out: the readiness timeout of 300ms ran out; resource group migrate (2/4); ConfigMap/ns/migrate: not yet)",
		},
		{
			name:    "a failed object ended the batch's wait early",
			stalled: true,
			want:    "failed early due to stalled resources: [ConfigMap/ns/migrate status: 'Failed'] (resource group migrate (2/4); ConfigMap/ns/migrate: broken for good)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeKube{}
			k := &wordingKube{fakeKube: f, notReady: "migrate", stalled: tc.stalled}
			c := Wrap(k, Options{Deadline: time.Now().Add(time.Minute), ReadinessTimeout: 300 * time.Millisecond, Get: f.GetObject})
			_, err := c.Create(build(t, c, shopManifest))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %q\nwant %q", err, tc.want)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("spans lines: %q", err)
			}
			if !tc.stalled && !errors.Is(err, context.DeadlineExceeded) {
				t.Error("the waiter's deadline is lost")
			}
		})
	}
}
