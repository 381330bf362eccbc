package recreate

import (
	"errors"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gateKinds are the built-in kinds the RecreateImmutableResources gate
// covers, each with the fields (and the fields under them) whose refusal
// it covers. Every field here is fixed once the object exists, and none
// of these objects holds data of its own: what the new object needs is in
// its manifest, and what the old one made (a Job's pods, a Deployment's
// ReplicaSets) is made again. Kinds that hold or lead to data
// (StatefulSet's volumeClaimTemplates, PersistentVolumeClaim, custom
// resources, whose operators may own anything) are not here: they need
// the annotation. docs/immutable.md lists the same table.
var gateKinds = map[schema.GroupKind][]string{
	// The pod template, the selector, completionMode and the other
	// fields of a Job's spec are fixed at creation.
	{Group: "batch", Kind: "Job"}: {"spec"},
	// The cluster IP(s) and the IP families are allocated once; a
	// headless Service cannot become one with an IP, nor the reverse.
	{Kind: "Service"}: {"spec.clusterIP", "spec.clusterIPs", "spec.ipFamilies"},
	// The selector of a Deployment, ReplicaSet or DaemonSet.
	{Group: "apps", Kind: "Deployment"}: {"spec.selector"},
	{Group: "apps", Kind: "ReplicaSet"}: {"spec.selector"},
	{Group: "apps", Kind: "DaemonSet"}:  {"spec.selector"},
	// The role a binding grants.
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        {"roleRef"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: {"roleRef"},
	// The content of a ConfigMap or Secret marked immutable: true, and a
	// Secret's type.
	{Kind: "ConfigMap"}: {"data", "binaryData", "immutable"},
	{Kind: "Secret"}:    {"data", "stringData", "immutable", "type"},
}

// gateCovers tells whether the gate covers the refusal cause of an object
// of kind gk: a kind of gateKinds, refused only for fields listed for it.
// A refusal that names no field (an admission webhook's message) is not
// covered: nothing shows it is about an immutable field.
func gateCovers(gk schema.GroupKind, cause error) bool {
	allowed, ok := gateKinds[gk]
	if !ok {
		return false
	}
	fields := refusedFields(cause)
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		if !underAny(f, allowed) {
			return false
		}
	}
	return true
}

// underAny tells whether field is one of roots or a field under one.
func underAny(field string, roots []string) bool {
	for _, root := range roots {
		if field == root || strings.HasPrefix(field, root+".") {
			return true
		}
	}
	return false
}

// index matches a list index or map key of a field path
// ("spec.clusterIPs[0]", "data[key]").
var index = regexp.MustCompile(`\[[^\]]*\]`)

// refusedFields returns the fields the API server's answer names, without
// list indexes or map keys.
func refusedFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		if c.Field == "" {
			return nil // a cause without a field: not shown to be a field's
		}
		fields = append(fields, index.ReplaceAllString(c.Field, ""))
	}
	return fields
}
