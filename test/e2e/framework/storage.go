package framework

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Stored is a Helm storage Secret with the release it holds.
type Stored struct {
	Secret  corev1.Secret
	Release releasev1.Release
}

// Status is the release's status, empty when it has no info.
func (s Stored) Status() string {
	if s.Release.Info == nil {
		return ""
	}
	return string(s.Release.Info.Status)
}

// Storage returns the Helm storage Secrets of release in ns, oldest
// revision first, with their decoded releases.
func (e *Env) Storage(t testing.TB, ns, release string) []Stored {
	t.Helper()
	out, err := e.ReadStorage(context.Background(), e.Client, ns, release)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadStorage is Storage on any cluster, returning errors.
func (e *Env) ReadStorage(ctx context.Context, c client.Client, ns, release string) ([]Stored, error) {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		return nil, fmt.Errorf("listing Helm storage: %w", err)
	}
	out := make([]Stored, 0, len(list.Items))
	for _, s := range list.Items {
		rel, err := DecodeRelease(s.Data["release"])
		if err != nil {
			return nil, fmt.Errorf("decoding Helm storage Secret %s: %w", s.Name, err)
		}
		out = append(out, Stored{Secret: s, Release: *rel})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Release.Version < out[j].Release.Version })
	return out, nil
}

// DecodeRelease reads a release the way Helm's Secret driver stores it:
// base64 of gzipped JSON.
func DecodeRelease(data []byte) (*releasev1.Release, error) {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	rel := &releasev1.Release{}
	if err := json.Unmarshal(raw, rel); err != nil {
		return nil, err
	}
	return rel, nil
}

// Describe lists revisions and statuses: "[v1 superseded, v2 deployed]".
func Describe(stored []Stored) string {
	out := make([]string, 0, len(stored))
	for _, s := range stored {
		out = append(out, fmt.Sprintf("v%d %s", s.Release.Version, s.Status()))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// SameStorage returns an error when the release's storage differs from
// before in revisions or their statuses.
func (e *Env) SameStorage(t testing.TB, ns, release string, before []Stored) error {
	t.Helper()
	if a, b := Describe(e.Storage(t, ns, release)), Describe(before); a != b {
		return fmt.Errorf("Helm storage changed from %s to %s", b, a)
	}
	return nil
}

// AfterHooksMarker starts the description of a revision held pending for
// its afterHooks readiness wait (internal/afterhooks/marker.go).
const AfterHooksMarker = "Waiting for resources to become ready (afterHooks, deadline "

// WantStorage checks the release's revisions, oldest first, have the given
// statuses both in the stored release and in the storage Secret's status
// label.
func (e *Env) WantStorage(t testing.TB, ns, release string, statuses ...string) {
	t.Helper()
	stored := e.Storage(t, ns, release)
	var got, want []string
	for i, s := range stored {
		got = append(got, fmt.Sprintf("v%d %s label %s", s.Release.Version, s.Status(), s.Secret.Labels["status"]))
		if i < len(statuses) {
			want = append(want, fmt.Sprintf("v%d %s label %s", i+1, statuses[i], statuses[i]))
		}
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") || len(stored) != len(statuses) {
		t.Errorf("Helm storage [%s], want [%s]", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

// HeldInstall returns nil when stored is exactly v1, pending-install in the
// release and in its Secret's label, with (marker) or without the
// afterHooks marker in its description: an install caught in its readiness
// wait, or before it.
func HeldInstall(stored []Stored, marker bool) error {
	if len(stored) != 1 {
		return fmt.Errorf("Helm storage %s, want v1 only", Describe(stored))
	}
	rel, label := stored[0].Release, stored[0].Secret.Labels["status"]
	if rel.Info == nil || rel.Info.Status != "pending-install" || label != "pending-install" {
		return fmt.Errorf("Helm storage %s (label %s), want v1 pending-install", Describe(stored), label)
	}
	if has := strings.HasPrefix(rel.Info.Description, AfterHooksMarker); has != marker {
		return fmt.Errorf("v1 pending-install with description %q, want the afterHooks marker: %t", rel.Info.Description, marker)
	}
	return nil
}

// WantNotPending checks no revision of the release is left pending.
func (e *Env) WantNotPending(t testing.TB, ns, release string) {
	t.Helper()
	stored := e.Storage(t, ns, release)
	for _, s := range stored {
		if s.Release.Info == nil || s.Release.Info.Status.IsPending() || strings.HasPrefix(s.Secret.Labels["status"], "pending") {
			t.Errorf("Helm storage %s (v%d label %s): a revision is left pending", Describe(stored),
				s.Release.Version, s.Secret.Labels["status"])
		}
	}
}
