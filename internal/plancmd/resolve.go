package plancmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/secrets"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
)

// fetchTimeout bounds every request to a chart repository or registry,
// as a HelmRepository's default timeout does.
const fetchTimeout = time.Minute

// resolved is a chart the plan fetched itself, and where from.
type resolved struct {
	chart *chartv2.Chart
	from  string
}

// resolveTemplate fetches the chart obj's chart template asks for, as
// source-controller would build it: from the template's OCI repository,
// or from the index or registry of its HelmRepository. digestPinned
// pins an OCIRepository's chart version to the manifest digest, as the
// controller does unless DisableChartDigestTracking is on.
func resolveTemplate(ctx context.Context, c client.Client, obj *v2.HelmRelease, digestPinned bool) (*resolved, error) {
	ref := obj.GetHelmChartTemplateReference()
	spec := obj.Spec.Chart.Spec
	if ref.Kind == sourcev1.OCIRepositoryKind {
		return pullTemplateOCI(ctx, c, ref.Namespace, spec.OCIRepositorySpec, digestPinned)
	}
	src := spec.SourceRef
	if src == nil || src.Kind != sourcev1.HelmRepositoryKind {
		kind := "none"
		if src != nil {
			kind = src.Kind
		}
		return nil, fmt.Errorf("the chart template's source (kind %s) is not one plan resolves yet, only a HelmRepository or an OCIRepository: plan it with --chart", kind)
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: src.Name}
	hr := &sourcev1.HelmRepository{}
	if err := c.Get(ctx, key, hr); err != nil {
		return nil, fmt.Errorf("reading the HelmRepository %s: %w", key, err)
	}
	r, err := fromHelmRepository(ctx, c, hr, spec.Chart, spec.GetVersion())
	if err != nil {
		return nil, fmt.Errorf("fetching chart %s@%s from HelmRepository %s: %w", spec.Chart, spec.GetVersion(), key, err)
	}
	if err := mergeValuesFiles(r.chart, spec.ValuesFiles, spec.IgnoreMissingValuesFiles); err != nil {
		return nil, err
	}
	return r, nil
}

func fromHelmRepository(ctx context.Context, c client.Client, hr *sourcev1.HelmRepository, chart, version string) (*resolved, error) {
	auth, err := readAuth(ctx, c, hr.Namespace, hr.Spec.SecretRef, hr.Spec.CertSecretRef, hr.Spec.Provider)
	if err != nil {
		return nil, err
	}
	if hr.Spec.Type == sourcev1.HelmRepositoryTypeOCI {
		if version == "*" {
			version = "" // the highest tag, as Helm reads an empty version
		}
		pulled, err := pullOCI(strings.TrimSuffix(hr.Spec.URL, "/")+"/"+chart, version, hr.Spec.Insecure, auth)
		if err != nil {
			return nil, err
		}
		return &resolved{chart: pulled.chart, from: fmt.Sprintf("HelmRepository %s/%s (OCI %s)", hr.Namespace, hr.Name, pulled.ref)}, nil
	}
	chrt, chartURL, err := fromIndex(hr.Spec.URL, chart, version, hr.Spec.PassCredentials, auth)
	if err != nil {
		return nil, err
	}
	return &resolved{chart: chrt, from: fmt.Sprintf("HelmRepository %s/%s (%s)", hr.Namespace, hr.Name, chartURL)}, nil
}

// credentials are what a source's secretRef and certSecretRef give.
type credentials struct {
	username, password string
	// dockerConfig is a kubernetes.io/dockerconfigjson secret's data.
	dockerConfig []byte
	tls          *tls.Config
}

// readAuth reads a source's secrets as source-controller does: basic
// auth or a docker config from secretRef, a client certificate and CA from
// certSecretRef. A cloud provider's login is not something the plan can
// do for the controller's identity.
func readAuth(ctx context.Context, c client.Client, ns string, secretRef, certSecretRef *meta.LocalObjectReference, provider string) (*credentials, error) {
	if provider != "" && provider != sourcev1.GenericOCIProvider {
		return nil, fmt.Errorf("the source logs in with provider %q, which plan cannot do as the controller's identity: plan it with --chart", provider)
	}
	creds := &credentials{}
	if secretRef != nil {
		secret, err := readSecret(ctx, c, ns, secretRef.Name)
		if err != nil {
			return nil, err
		}
		if data, ok := secret.Data[corev1.DockerConfigJsonKey]; ok {
			creds.dockerConfig = data
		} else if basic, err := secrets.BasicAuthFromSecret(ctx, secret); err == nil {
			creds.username, creds.password = basic.Username, basic.Password
		} else {
			return nil, fmt.Errorf("secret %s/%s: %w", ns, secretRef.Name, err)
		}
	}
	if certSecretRef != nil {
		secret, err := readSecret(ctx, c, ns, certSecretRef.Name)
		if err != nil {
			return nil, err
		}
		if creds.tls, err = secrets.TLSConfigFromSecret(ctx, secret); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", ns, certSecretRef.Name, err)
		}
	}
	return creds, nil
}

func readSecret(ctx context.Context, c client.Client, ns, name string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", ns, name, err)
	}
	return secret, nil
}

// fromIndex finds chart at version (a version or a semver range) in the
// index of the HTTP chart repository at repoURL and downloads it, with
// Helm's own getter and index reader.
func fromIndex(repoURL, chart, version string, passCredentials bool, creds *credentials) (*chartv2.Chart, string, error) {
	opts := []getter.Option{getter.WithURL(repoURL), getter.WithTimeout(fetchTimeout), getter.WithPassCredentialsAll(passCredentials)}
	if creds.username != "" || creds.password != "" {
		opts = append(opts, getter.WithBasicAuth(creds.username, creds.password))
	}
	if creds.tls != nil {
		opts = append(opts, getter.WithTransport(&http.Transport{TLSClientConfig: creds.tls, Proxy: http.ProxyFromEnvironment}))
	}
	g, err := getter.NewHTTPGetter(opts...)
	if err != nil {
		return nil, "", err
	}
	indexURL, err := repo.ResolveReferenceURL(repoURL, "index.yaml")
	if err != nil {
		return nil, "", err
	}
	index, err := readIndex(g, indexURL)
	if err != nil {
		return nil, "", err
	}
	cv, err := index.Get(chart, version)
	if err != nil {
		return nil, "", fmt.Errorf("the index has no chart %s matching version %s", chart, version)
	}
	if len(cv.URLs) == 0 {
		return nil, "", fmt.Errorf("the index lists chart %s@%s without a URL", chart, cv.Version)
	}
	chartURL, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return nil, "", err
	}
	data, err := g.Get(chartURL)
	if err != nil {
		return nil, "", fmt.Errorf("downloading %s: %w", chartURL, err)
	}
	chrt, err := loader.LoadArchive(data)
	if err != nil {
		return nil, "", fmt.Errorf("loading %s: %w", chartURL, err)
	}
	return chrt, chartURL, nil
}

// readIndex downloads and parses a repository index. Helm reads an index
// from a file only, so it goes through a temporary one.
func readIndex(g getter.Getter, indexURL string) (*repo.IndexFile, error) {
	data, err := g.Get(indexURL)
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", indexURL, err)
	}
	dir, err := os.MkdirTemp("", "plan-index-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index.yaml")
	if err := os.WriteFile(path, data.Bytes(), 0o600); err != nil {
		return nil, err
	}
	index, err := repo.LoadIndexFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the index %s: %w", indexURL, err)
	}
	return index, nil
}

// pulled is a chart pulled from a registry: the reference it resolved to
// and the manifest's digest.
type pulled struct {
	chart  *chartv2.Chart
	ref    string
	digest string
}

// pullOCI pulls the chart at oci:// repository ref, at version (a tag, a
// semver range, "@<digest>", or empty for the highest tag), with Helm's
// registry client.
func pullOCI(ref, version string, plainHTTP bool, creds *credentials) (*pulled, error) {
	rc, cleanup, err := registryClient(plainHTTP, creds)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if !strings.HasPrefix(ref, registry.OCIScheme+"://") {
		ref = registry.OCIScheme + "://" + ref
	}
	u, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("OCI reference %s: %w", ref, err)
	}
	if _, u, err = rc.ValidateReference(ref, version, u); err != nil {
		return nil, fmt.Errorf("resolving %s %s: %w", ref, version, err)
	}
	target := strings.TrimPrefix(u.String(), registry.OCIScheme+"://")
	res, err := rc.Pull(target, registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", target, err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", target, err)
	}
	return &pulled{chart: chrt, ref: target, digest: res.Manifest.Digest}, nil
}

// registryClient is Helm's registry client with creds; cleanup removes
// the credentials file a docker config is written to.
func registryClient(plainHTTP bool, creds *credentials) (*registry.Client, func(), error) {
	dir, err := os.MkdirTemp("", "plan-registry-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	// A credentials file of the plan's own, so that the user's docker
	// logins play no part: the controller has none of them.
	credsFile := filepath.Join(dir, "config.json")
	config := creds.dockerConfig
	if config == nil {
		config = []byte(`{"auths":{}}`)
	}
	if err := os.WriteFile(credsFile, config, 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	opts := []registry.ClientOption{registry.ClientOptCredentialsFile(credsFile), registry.ClientOptWriter(io.Discard)}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if creds.username != "" || creds.password != "" {
		opts = append(opts, registry.ClientOptBasicAuth(creds.username, creds.password))
	}
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: creds.tls}
	opts = append(opts, registry.ClientOptHTTPClient(&http.Client{Transport: transport, Timeout: fetchTimeout}))
	rc, err := registry.NewClient(opts...)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("creating the registry client: %w", err)
	}
	return rc, cleanup, nil
}

// pullTemplateOCI pulls the chart of an OCIRepository chart template, and
// pins its version to the manifest digest as the controller does.
func pullTemplateOCI(ctx context.Context, c client.Client, ns string, spec sourcev1.OCIRepositorySpec, digestPinned bool) (*resolved, error) {
	auth, err := readAuth(ctx, c, ns, spec.SecretRef, spec.CertSecretRef, spec.Provider)
	if err != nil {
		return nil, err
	}
	ref, version := spec.URL, "latest"
	switch r := spec.Reference; {
	case r == nil:
	case r.Digest != "":
		ref, version = spec.URL+"@"+r.Digest, ""
	case r.SemVer != "":
		version = r.SemVer
	case r.Tag != "":
		version = r.Tag
	}
	p, err := pullOCI(ref, version, spec.Insecure, auth)
	if err != nil {
		return nil, fmt.Errorf("fetching the chart of %s: %w", ociLocation(spec), err)
	}
	if digestPinned {
		pinned, _, err := chartsource.PinnedVersion(p.chart.Metadata.Version, p.digest)
		if err != nil {
			return nil, fmt.Errorf("pinning the chart of %s to its digest: %w", ociLocation(spec), err)
		}
		p.chart.Metadata.Version = pinned
	}
	return &resolved{chart: p.chart, from: fmt.Sprintf("OCI %s (%s)", p.ref, p.digest)}, nil
}

// mergeValuesFiles gives chrt the values source-controller packages into
// a HelmChart with spec.valuesFiles: those files of the chart merged in
// order, later ones winning.
func mergeValuesFiles(chrt *chartv2.Chart, files []string, ignoreMissing bool) error {
	if len(files) == 0 {
		return nil
	}
	merged := map[string]any{}
	for _, name := range files {
		data, ok := chartFile(chrt, name)
		if !ok {
			if ignoreMissing {
				continue
			}
			return fmt.Errorf("chart %s has no values file %s (spec.chart.spec.valuesFiles)", chrt.Name(), name)
		}
		values, err := chartcommon.ReadValues(data)
		if err != nil {
			return fmt.Errorf("reading values file %s of chart %s: %w", name, chrt.Name(), err)
		}
		merged = loader.MergeMaps(merged, values)
	}
	chrt.Values = merged
	return nil
}

func chartFile(chrt *chartv2.Chart, name string) ([]byte, bool) {
	name = strings.TrimPrefix(filepath.ToSlash(name), "./")
	for _, f := range chrt.Raw {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}
