package controller

import (
	"testing"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// sharedAPIServer is a kube-apiserver and etcd with source-controller's
// CRDs, from the project's tool cache, started by the first test that needs
// it; tests that use it are skipped with -short.
var sharedAPIServer = envtestserver.Shared{SourceCRDs: true, SkipShort: true}

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

// apiServer is the shared server's config under the name the package's
// tests use.
var apiServer = sharedAPIServer.Config
