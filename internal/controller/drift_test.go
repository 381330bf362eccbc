package controller

import (
	"errors"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/drift"
)

func TestCheckDriftDetection(t *testing.T) {
	bad := []helmv2.IgnoreRule{{Paths: []string{"spec/replicas"}}}
	good := []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}}
	cases := []struct {
		name    string
		dd      *helmv2.DriftDetection
		wantErr bool
	}{
		{name: "no drift detection"},
		{name: "disabled mode ignores its rules", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionDisabled, Ignore: bad}},
		{name: "unset mode is disabled", dd: &helmv2.DriftDetection{Ignore: bad}},
		{name: "enabled with valid rules", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: good}},
		{name: "enabled with an invalid rule", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: bad}, wantErr: true},
		{name: "warn with an invalid rule", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionWarn, Ignore: bad}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			obj.Spec.DriftDetection = tc.dd
			_, err := driftIgnoreRules(obj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, drift.ErrInvalidIgnoreRule) || !strings.Contains(err.Error(), `"spec/replicas"`)) {
				t.Errorf("error %q does not name the bad rule", err)
			}
		})
	}
}
