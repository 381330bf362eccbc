package action

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/storagedriver"
)

// tagDriver records the order in which wrappers were applied.
type tagDriver struct {
	driver.Driver
	tag string
}

func TestConfigFactoryBuild(t *testing.T) {
	restCfg := &rest.Config{Host: "https://127.0.0.1:1"}
	f, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.FieldManager() != "helm-controller" || kube.ManagedFieldsManager != "helm-controller" {
		t.Errorf("field manager %q (Helm's %q), want helm-controller", f.FieldManager(), kube.ManagedFieldsManager)
	}

	wrap := func(tag string) ConfigOption {
		return WithStorageDriver(func(d driver.Driver) driver.Driver { return &tagDriver{Driver: d, tag: tag} })
	}
	cfg, err := f.Build("store", "apps", wrap("inner"), wrap("outer"))
	if err != nil {
		t.Fatal(err)
	}
	kc, ok := cfg.KubeClient.(*helmclient.Client)
	if !ok {
		t.Fatalf("kube client is %T, want *helmclient.Client", cfg.KubeClient)
	}
	if kc.Namespace != "apps" {
		t.Errorf("kube client namespace %q, want the release namespace apps", kc.Namespace)
	}
	outer, ok := cfg.Releases.Driver.(*tagDriver)
	if !ok || outer.tag != "outer" {
		t.Fatalf("outermost driver %#v, want the last wrapper", cfg.Releases.Driver)
	}
	inner, ok := outer.Driver.(*tagDriver)
	if !ok || inner.tag != "inner" {
		t.Fatalf("inner driver %#v, want the first wrapper", outer.Driver)
	}
	if _, ok := inner.Driver.(*storagedriver.Secrets); !ok {
		t.Errorf("innermost driver is %T, want the Secret driver of internal/storagedriver", inner.Driver)
	}
	if cfg.RESTClientGetter == nil || cfg.HookOutputFunc == nil {
		t.Error("configuration lacks a RESTClientGetter or HookOutputFunc")
	}
	if got, _ := cfg.RESTClientGetter.ToRESTConfig(); got.Host != restCfg.Host {
		t.Errorf("getter host %q", got.Host)
	}
}

func TestConfigFactoryErrors(t *testing.T) {
	restCfg := &rest.Config{Host: "https://127.0.0.1:1"}
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{name: "nil getter", run: func() error { _, err := NewConfigFactory(nil); return err }, wantErr: "nil RESTClientGetter"},
		{name: "nil rest config", run: func() error { _, err := NewConfigFactoryFromRESTConfig(nil); return err }, wantErr: "nil REST config"},
		{name: "empty field manager", run: func() error {
			_, err := NewConfigFactoryFromRESTConfig(restCfg, WithFieldManager(""))
			return err
		}, wantErr: "field manager"},
		{name: "missing namespaces", run: func() error {
			f, err := NewConfigFactoryFromRESTConfig(restCfg)
			if err != nil {
				return err
			}
			_, err = f.Build("", "apps")
			return err
		}, wantErr: "required"},
		{name: "wrapper returning nil", run: func() error {
			f, err := NewConfigFactoryFromRESTConfig(restCfg)
			if err != nil {
				return err
			}
			_, err = f.Build("store", "apps", WithStorageDriver(func(driver.Driver) driver.Driver { return nil }))
			return err
		}, wantErr: "returned nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestWithFieldManager(t *testing.T) {
	t.Cleanup(func() { kube.ManagedFieldsManager = DefaultFieldManager })
	f, err := NewConfigFactoryFromRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}, WithFieldManager("custom"))
	if err != nil {
		t.Fatal(err)
	}
	if f.FieldManager() != "custom" || kube.ManagedFieldsManager != "custom" {
		t.Errorf("field manager %q (Helm's %q), want custom", f.FieldManager(), kube.ManagedFieldsManager)
	}
}

func TestForGetter(t *testing.T) {
	t.Cleanup(func() { kube.ManagedFieldsManager = DefaultFieldManager })
	f, err := NewConfigFactoryFromRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}, WithFieldManager("custom"))
	if err != nil {
		t.Fatal(err)
	}
	kube.ManagedFieldsManager = "someone-else"
	remote := NewRESTClientGetter(&rest.Config{Host: "https://127.0.0.1:2",
		Impersonate: rest.ImpersonationConfig{UserName: "system:serviceaccount:apps:deployer"}})
	derived, err := f.ForGetter(remote)
	if err != nil {
		t.Fatal(err)
	}
	if derived.FieldManager() != "custom" || kube.ManagedFieldsManager != "someone-else" {
		t.Errorf("derived field manager %q, Helm's %q: want custom, and Helm's untouched", derived.FieldManager(), kube.ManagedFieldsManager)
	}
	cfg, err := derived.Build("apps", "apps")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cfg.RESTClientGetter.ToRESTConfig()
	if got.Host != "https://127.0.0.1:2" || got.Impersonate.UserName != "system:serviceaccount:apps:deployer" {
		t.Errorf("configuration reaches %s as %q, want the derived getter's", got.Host, got.Impersonate.UserName)
	}
	if _, err := f.ForGetter(nil); err == nil {
		t.Error("nil getter accepted")
	}
}

// TestNewestReadThroughWrappers: the newest revision is read by the Secret
// driver itself (one record decoded) through the WriteLog, and through any
// wrapper that says what it wraps; a wrapper that does not leaves Helm's
// History to decide.
func TestNewestReadThroughWrappers(t *testing.T) {
	f, err := NewConfigFactoryFromRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	log := &WriteLog{}
	tests := []struct {
		name string
		wrap func(driver.Driver) driver.Driver
		want bool
	}{
		{name: "the WriteLog", wrap: log.Wrap, want: true},
		{name: "an opaque wrapper", wrap: func(d driver.Driver) driver.Driver { return &tagDriver{Driver: d} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := f.Build("store", "apps", WithStorageDriver(tc.wrap))
			if err != nil {
				t.Fatal(err)
			}
			reader := newestReaderOf(cfg.Releases.Driver)
			if _, isSecrets := reader.(*storagedriver.Secrets); isSecrets != tc.want {
				t.Errorf("newest read by %T, want the Secret driver: %v", reader, tc.want)
			}
		})
	}
}
