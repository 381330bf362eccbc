package storagedriver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// helmsNewest is what Helm's own driver makes of the records: every
// revision it can decode, the highest version.
func helmsNewest(t *testing.T, secrets typedcorev1.SecretInterface, name string) (*releasev1.Release, error) {
	t.Helper()
	items, err := driver.NewSecrets(secrets).Query(map[string]string{"name": name, "owner": "helm"})
	if err != nil {
		return nil, err
	}
	var newest *releasev1.Release
	for _, item := range items {
		rls := item.(*releasev1.Release)
		if newest == nil || rls.Version > newest.Version {
			newest = rls
		}
	}
	return newest, nil
}

func TestNewestIsHelmsNewest(t *testing.T) {
	write := func(helms bool) func(t *testing.T, secrets typedcorev1.SecretInterface, rls *releasev1.Release) {
		return func(t *testing.T, secrets typedcorev1.SecretInterface, rls *releasev1.Release) {
			t.Helper()
			var d driver.Driver = NewSecrets(secrets)
			if helms {
				d = driver.NewSecrets(secrets)
			}
			if err := d.Create(fmt.Sprintf("sh.helm.release.v1.%s.v%d", rls.Name, rls.Version), rls); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name     string
		versions int
		helms    bool
		// spoil changes the stored records before reading.
		spoil   func(t *testing.T, secrets typedcorev1.SecretInterface)
		wantVer int
	}{
		{name: "three revisions, ours", versions: 3, wantVer: 3},
		{name: "three revisions, Helm's", versions: 3, helms: true, wantVer: 3},
		{name: "twelve revisions: 10 sorts after 9", versions: 12, wantVer: 12},
		{name: "the newest record does not decode", versions: 3, wantVer: 2, spoil: func(t *testing.T, secrets typedcorev1.SecretInterface) {
			s, err := secrets.Get(context.Background(), "sh.helm.release.v1.podinfo.v3", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Data["release"] = []byte("not a record")
			if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a record without a version label", versions: 3, wantVer: 3, spoil: func(t *testing.T, secrets typedcorev1.SecretInterface) {
			s, err := secrets.Get(context.Background(), "sh.helm.release.v1.podinfo.v2", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			delete(s.Labels, "version")
			if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no revision", versions: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secrets := fake.NewClientset().CoreV1().Secrets("store")
			// A neighbour with more revisions must not be read.
			for v := 1; v <= 4; v++ {
				other := podinfoRelease(t, v, common.StatusSuperseded)
				other.Name = "other"
				write(false)(t, secrets, other)
			}
			for v := 1; v <= tc.versions; v++ {
				status := common.StatusSuperseded
				if v == tc.versions {
					status = common.StatusDeployed
				}
				write(tc.helms)(t, secrets, podinfoRelease(t, v, status))
			}
			if tc.spoil != nil {
				tc.spoil(t, secrets)
			}

			got, err := NewSecrets(secrets).Newest("podinfo")
			want, helmErr := helmsNewest(t, secrets, "podinfo")
			if tc.versions == 0 {
				if !errors.Is(err, driver.ErrReleaseNotFound) || !errors.Is(helmErr, driver.ErrReleaseNotFound) {
					t.Fatalf("Newest: %v, Helm: %v; want both ErrReleaseNotFound", err, helmErr)
				}
				return
			}
			if err != nil || helmErr != nil {
				t.Fatalf("Newest: %v, Helm: %v", err, helmErr)
			}
			rls := got.(*releasev1.Release)
			if rls.Version != tc.wantVer || want.Version != tc.wantVer {
				t.Fatalf("newest version %d (Helm's %d), want %d", rls.Version, want.Version, tc.wantVer)
			}
			if mustJSON(t, rls) != mustJSON(t, want) || !reflect.DeepEqual(rls.Labels, want.Labels) {
				t.Errorf("newest differs from Helm's:\n%s\n%s", mustJSON(t, rls), mustJSON(t, want))
			}
		})
	}
}
