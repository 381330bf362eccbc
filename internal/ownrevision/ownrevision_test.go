package ownrevision

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/util/validation"
)

func revision(version int, labels map[string]string) *releasev1.Release {
	return &releasev1.Release{Name: "app", Namespace: "default", Version: version, Labels: labels,
		Info: &releasev1.Info{Status: common.StatusDeployed}}
}

// A mark matches only the revision it was written for: the version, the
// HelmRelease and the history snapshot its action started from. Helm
// copies a revision's labels into the next one on upgrade and rollback,
// and a copy must never pass for the controller's own.
func TestMarks(t *testing.T) {
	ours := Mark{Owner: "uid-1", After: "sha256:aaaa"}
	cases := []struct {
		name string
		rel  *releasev1.Release
		want bool
	}{
		{"the revision the action made", ours.Labelled(revision(3, nil)), true},
		{"the mark with other labels kept", ours.Labelled(revision(3, map[string]string{"team": "payments"})), true},
		{"no labels (made by hand, or by upstream)", revision(3, nil), false},
		{"other labels only", revision(3, map[string]string{"team": "payments"}), false},
		{"copied into the next revision by helm upgrade", revision(4, maps.Clone(ours.Labelled(revision(3, nil)).Labels)), false},
		{"copied into a later revision by helm rollback", revision(7, maps.Clone(ours.Labelled(revision(3, nil)).Labels)), false},
		{"made by another HelmRelease", Mark{Owner: "uid-2", After: ours.After}.Labelled(revision(3, nil)), false},
		{"made from another history", Mark{Owner: ours.Owner, After: "sha256:bbbb"}.Labelled(revision(3, nil)), false},
		{"made by an install (empty history)", Mark{Owner: ours.Owner}.Labelled(revision(3, nil)), false},
		{"an empty value", revision(3, map[string]string{Label: ""}), false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ours.Marks(tc.rel); got != tc.want {
				t.Errorf("Marks = %v, want %v (labels %v)", got, tc.want, tc.rel)
			}
		})
	}
}

// The mark is a valid label value (Secret labels, under Helm's secret
// driver), and leaves the release it labels alone: Helm's rollback hands
// the target revision's own label map to the new one.
func TestLabelled(t *testing.T) {
	m := Mark{Owner: "0d3c1f4e-8f5e-4d1a-9a0b-3f0c6d2b7e11", After: "sha512:" + strings.Repeat("f", 128)}
	for _, version := range []int{1, 42, 1 << 30} {
		v := m.Value(version)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("Value(%d) = %q is not a label value: %v", version, v, errs)
		}
	}
	shared := map[string]string{"team": "payments"}
	rel := revision(2, shared)
	got := m.Labelled(rel)
	if _, ok := shared[Label]; ok || rel.Labels[Label] != "" {
		t.Errorf("Labelled changed the labels it was given: %v", shared)
	}
	if got.Labels["team"] != "payments" || !m.Marks(got) {
		t.Errorf("labels %v, want the mark beside the labels given", got.Labels)
	}
}

// memory is a driver that keeps what was written, by key.
type memory struct {
	driver.Driver
	stored map[string]*releasev1.Release
	err    error
}

func (d *memory) Create(key string, rls release.Releaser) error { return d.write(key, rls) }
func (d *memory) Update(key string, rls release.Releaser) error { return d.write(key, rls) }
func (d *memory) write(key string, rls release.Releaser) error {
	if d.err != nil {
		return d.err
	}
	d.stored[key] = rls.(*releasev1.Release)
	return nil
}

// Stamp marks the revision an action creates on every write of it, and
// nothing else: Helm's upgrade updates the previous revision (superseded)
// and, on install with replace, an uninstalled one before it creates its
// own; it then writes its own revision again for each hook and at the end,
// from its in-memory copy, which has no mark.
func TestStamp(t *testing.T) {
	m := Mark{Owner: "uid-1", After: "sha256:aaaa"}
	raw := &memory{stored: map[string]*releasev1.Release{}}
	d := Stamp(raw, m)
	previous := revision(1, map[string]string{"team": "payments"})
	created := revision(2, previous.Labels) // Helm copies the map
	steps := []struct {
		write func(string, release.Releaser) error
		key   string
		rel   *releasev1.Release
	}{
		{d.Update, "v1", previous}, // supersede (install with replace)
		{d.Create, "v2", created},
		{d.Update, "v2", created}, // a hook ran
		{d.Update, "v1", previous},
		{d.Update, "v2", created}, // deployed
	}
	for _, s := range steps {
		if err := s.write(s.key, s.rel); err != nil {
			t.Fatal(err)
		}
		if got := raw.stored[s.key]; m.Marks(got) != (s.key == "v2") {
			t.Fatalf("after a write of %s: stored labels %v", s.key, got.Labels)
		}
	}
	if _, ok := created.Labels[Label]; ok {
		t.Error("Stamp changed Helm's release (and the label map it shares with revision 1)")
	}
	if d.(interface{ Unwrap() driver.Driver }).Unwrap() != raw {
		t.Error("Unwrap does not return the wrapped driver")
	}

	raw.err = errors.New("storage down")
	if err := d.Update("v2", created); !errors.Is(err, raw.err) {
		t.Errorf("error %v, want the driver's", err)
	}
}
