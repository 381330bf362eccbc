package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	_ "github.com/opencontainers/go-digest/blake3"
)

// runWithAlgorithm reconciles h as the controller would with
// --snapshot-digest-algo=algo.
func runWithAlgorithm(t *testing.T, h *harness, algo digest.Algorithm) {
	t.Helper()
	req := h.request()
	req.DigestAlgorithm = algo
	req.ConfigDigest = chartutil.DigestValues(algo, h.values).String()
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Run(context.Background(), req); err != nil {
		t.Fatalf("reconcile with %s failed: %v", algo, err)
	}
}

// Switching --snapshot-digest-algo on a running fleet must not upgrade
// releases or reset their failure counts; new snapshots then use the new
// algorithm.
func TestSwitchingDigestAlgorithm(t *testing.T) {
	h := newHarness()
	runWithAlgorithm(t, h, digest.SHA256)
	wantCalls(t, h, "install")

	h.obj.Status.Failures = 2 // as if earlier attempts had failed
	runWithAlgorithm(t, h, digest.SHA512)
	wantCalls(t, h)
	if h.obj.Status.Failures != 2 {
		t.Errorf("failures %d after the switch, want 2: the same values were taken for new ones", h.obj.Status.Failures)
	}
	if got := h.obj.Status.History.Latest().Digest; !strings.HasPrefix(got, "sha256:") {
		t.Errorf("in-sync reconcile rewrote the snapshot digest: %s", got)
	}

	h.values = map[string]any{"replicas": 3}
	runWithAlgorithm(t, h, digest.SHA512)
	wantCalls(t, h, "upgrade")
	latest := h.obj.Status.History.Latest()
	for field, d := range map[string]string{"digest": latest.Digest, "configDigest": latest.ConfigDigest,
		"lastAttemptedConfigDigest": h.obj.Status.LastAttemptedConfigDigest} {
		if !strings.HasPrefix(d, "sha512:") {
			t.Errorf("%s %q after an upgrade with sha512, want a sha512 digest", field, d)
		}
	}
}

// --snapshot-digest-algo=blake3, which upstream accepts, records blake3
// digests and compares values by content like the others.
func TestBlake3Snapshots(t *testing.T) {
	h := newHarness()
	runWithAlgorithm(t, h, digest.BLAKE3)
	wantCalls(t, h, "install")
	latest := h.obj.Status.History.Latest()
	for field, d := range map[string]string{"digest": latest.Digest, "configDigest": latest.ConfigDigest} {
		if !strings.HasPrefix(d, "blake3:") {
			t.Errorf("%s %q, want a blake3 digest", field, d)
		}
	}
	runWithAlgorithm(t, h, digest.BLAKE3)
	wantCalls(t, h)
}

// A status last written by an old upstream controller has only the
// deprecated lastAttemptedValuesChecksum (hex SHA-1 of the values). The
// same values must not count as a new attempt: the failure counters stay,
// as upstream falls back to that checksum.
func TestLegacyValuesChecksumKeepsFailureCounters(t *testing.T) {
	h := newHarness()
	req := h.request()
	sha1Values := chartutil.DigestValues(digest.Algorithm("sha1"), h.values)
	tests := []struct {
		name     string
		checksum string
		want     int64
	}{
		{"same values", sha1Values.Encoded(), 2},
		{"other values", chartutil.DigestValues(digest.Algorithm("sha1"), map[string]any{"replicas": 9}).Encoded(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &h.obj.Status
			st.LastAttemptedGeneration = h.obj.Generation
			st.LastAttemptedRevision = req.Chart.Metadata().Version
			st.LastAttemptedConfigDigest = ""
			st.LastAttemptedValuesChecksum = tt.checksum
			st.Failures, st.InstallFailures = 2, 2
			(&Machine{}).trackAttempt(req)
			if st.Failures != tt.want || st.InstallFailures != tt.want {
				t.Errorf("failures %d, install failures %d, want %d", st.Failures, st.InstallFailures, tt.want)
			}
			if st.LastAttemptedValuesChecksum != "" || st.LastAttemptedConfigDigest != req.ConfigDigest {
				t.Errorf("checksum %q, config digest %q: want the deprecated field replaced", st.LastAttemptedValuesChecksum, st.LastAttemptedConfigDigest)
			}
		})
	}
}
