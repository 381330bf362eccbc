package controller

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

func TestCheckDriftDetection(t *testing.T) {
	bad := []helmv2.IgnoreRule{{Paths: []string{"spec/replicas"}}}
	good := []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}}
	cases := []struct {
		name     string
		dd       *helmv2.DriftDetection
		wantWarn bool
		rules    int
	}{
		{name: "no drift detection"},
		{name: "disabled mode ignores its rules", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionDisabled, Ignore: bad}},
		{name: "unset mode is disabled", dd: &helmv2.DriftDetection{Ignore: bad}},
		{name: "enabled with valid rules", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: good}, rules: 1},
		{name: "enabled with a rule that is not a JSON pointer", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: bad}, wantWarn: true, rules: 1},
		{name: "warn with a rule that is not a JSON pointer", dd: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionWarn, Ignore: bad}, wantWarn: true, rules: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			obj.Spec.DriftDetection = tc.dd
			rules, warnings := driftIgnoreRules(obj)
			if (len(warnings) > 0) != tc.wantWarn {
				t.Fatalf("warnings %q, want some: %v", warnings, tc.wantWarn)
			}
			if tc.wantWarn && !strings.Contains(warnings[0], `"spec/replicas"`) {
				t.Errorf("warning %q does not name the rule's path", warnings[0])
			}
			if len(rules.Detect) != tc.rules {
				t.Errorf("%d rules for detection, want %d: a rule upstream uses is used", len(rules.Detect), tc.rules)
			}
		})
	}
}
