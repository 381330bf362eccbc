package plancmd

import (
	"testing"

	"k8s.io/client-go/rest"
)

// A plan sends a few hundred requests for a large chart (cert-manager's
// upgrade: 104 reads and 46 dry runs); with client-go's default limits
// (5 a second) that took 11.6 s on the e2e cluster, 1.1 s with the
// controller's. The limits apply whatever the kubeconfig.
func TestPlanClientRateLimitsAreTheControllers(t *testing.T) {
	path := writeKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:6443"}, "")
	cfg, _, err := restConfig(&options{kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != planQPS || cfg.Burst != planBurst {
		t.Errorf("QPS %v, burst %d; want the controller's %d and %d", cfg.QPS, cfg.Burst, planQPS, planBurst)
	}
}
