package helmclient

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/openapi/cached"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/validation"
)

// FieldValidation remembers, for one cluster, the kinds whose manifests the
// API server validates itself, so Helm's manifest validation stops asking
// the server's OpenAPI schema about them. Only a "yes" is remembered: a
// kind the server cannot vouch for yet (a CRD just installed, a schema not
// served) is asked again next time, so it falls back to client-side
// validation exactly as Helm does. Safe for concurrent use.
type FieldValidation struct {
	mu        sync.RWMutex
	validated map[schema.GroupVersionKind]struct{}
}

// NewFieldValidation returns an empty FieldValidation for one cluster.
func NewFieldValidation() *FieldValidation {
	return &FieldValidation{validated: map[schema.GroupVersionKind]struct{}{}}
}

func (v *FieldValidation) known(gvk schema.GroupVersionKind) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, ok := v.validated[gvk]
	return ok
}

func (v *FieldValidation) remember(gvk schema.GroupVersionKind) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.validated[gvk] = struct{}{}
}

// Len is how many kinds are known to be validated by the server.
func (v *FieldValidation) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.validated)
}

// verifier answers resource.Verifier for one Helm action: from what v
// knows, else by asking the cluster as kubectl does (OpenAPI v3, then v2).
type verifier struct {
	known *FieldValidation
	// ask builds kubectl's verifier on first use; most actions need none.
	ask func() (resource.Verifier, error)
}

func (c *verifier) HasSupport(gvk schema.GroupVersionKind) error {
	if c.known.known(gvk) {
		return nil
	}
	server, err := c.ask()
	if err != nil {
		return fmt.Errorf("field validation support for %s: %w", gvk, err)
	}
	if err := server.HasSupport(gvk); err != nil {
		return err
	}
	c.known.remember(gvk)
	return nil
}

// serverVerifier is kubectl's check of the fieldValidation parameter for f's
// cluster: the OpenAPI v3 document, with the v2 one as fallback.
func serverVerifier(f cmdutil.Factory) (resource.Verifier, error) {
	dynamicClient, err := f.DynamicClient()
	if err != nil {
		return nil, err
	}
	discoveryClient, err := f.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	param := resource.QueryParamFieldValidation
	v3 := resource.NewQueryParamVerifierV3(dynamicClient, cached.NewClient(discoveryClient.OpenAPIV3()), param)
	v2 := resource.NewQueryParamVerifier(dynamicClient, discoveryClient, param)
	return resource.NewFallbackQueryParamVerifier(v3, v2), nil
}

// validatingFactory is kubectl's factory with a Validator that shares what
// FieldValidation knows across actions.
type validatingFactory struct {
	cmdutil.Factory
	known *FieldValidation
}

// Validator validates as kubectl's does: nothing when asked to ignore
// unknown fields; otherwise the server validates the kinds it can, and the
// rest are checked against the OpenAPI schema on the client (strict) or
// only warned about by the server.
func (f *validatingFactory) Validator(directive string) (validation.Schema, error) {
	if directive == metav1.FieldValidationIgnore {
		return validation.NullSchema{}, nil
	}
	clientSide := validation.ConjunctiveSchema{
		validation.NewSchemaValidation(f.Factory),
		validation.NoDoubleKeySchema{},
	}
	var once sync.Once
	var server resource.Verifier
	var serverErr error
	ask := func() (resource.Verifier, error) {
		once.Do(func() { server, serverErr = serverVerifier(f.Factory) })
		return server, serverErr
	}
	return validation.NewParamVerifyingSchema(clientSide, &verifier{known: f.known, ask: ask}, directive), nil
}
