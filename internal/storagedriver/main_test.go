package storagedriver

import (
	"testing"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// sharedAPIServer is the kube-apiserver and etcd of the tests that need
// real resourceVersions and UIDs; they are skipped with -short.
var sharedAPIServer = envtestserver.Shared{SkipShort: true}

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }
