package controller

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// sharedAPIServer is a kube-apiserver and etcd with source-controller's
// CRDs, from the project's tool cache, started by the first test that needs
// it; tests that use it are skipped with -short.
var sharedAPIServer = envtestserver.Shared{SourceCRDs: true}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedAPIServer.Stop()
	os.Exit(code)
}

func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an API server")
	}
	return sharedAPIServer.Config(t)
}
