package framework

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Call is an API request as a test reads it: what it does to which object.
type Call struct {
	// Verb is get, list, watch, create, update, patch or delete.
	Verb      string
	Resource  string
	Namespace string
	// Name is the object's name, from the path or, for a create, from the
	// body.
	Name string
	// FieldSelector and LabelSelector are those of a list or watch.
	FieldSelector, LabelSelector string
	// Labels are the labels of the object written, when the body is JSON.
	Labels map[string]string
}

// maxBodyRead bounds how much of a body ParseCall reads for the name and
// labels of an object; Helm release Secrets stay far below it.
const maxBodyRead = 4 << 20

// ParseCall reads r's path, query and, for writes, its JSON body (which it
// leaves readable for the API server).
func ParseCall(r *http.Request) Call {
	c := Call{
		FieldSelector: r.URL.Query().Get("fieldSelector"),
		LabelSelector: r.URL.Query().Get("labelSelector"),
	}
	// /api/v1/... or /apis/<group>/<version>/...
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return c
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		c.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		c.Resource = parts[0]
	}
	if len(parts) > 1 {
		c.Name = parts[1]
	}
	c.Verb = verbOf(r.Method, c.Name != "", r.URL.Query().Get("watch") == "true")
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyRead))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		name, labels := objectMeta(body)
		c.Labels = labels
		if c.Name == "" {
			c.Name = name
		}
	}
	return c
}

func verbOf(method string, named, watch bool) string {
	switch {
	case watch:
		return "watch"
	case method == http.MethodGet && named:
		return "get"
	case method == http.MethodGet:
		return "list"
	case method == http.MethodPost:
		return "create"
	case method == http.MethodPut:
		return "update"
	case method == http.MethodPatch:
		return "patch"
	case method == http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// Writes reports whether the call creates or changes the object (a patch
// may create it, as server-side apply does).
func (c Call) Writes() bool {
	return c.Verb == "create" || c.Verb == "update" || c.Verb == "patch"
}

// objectMeta reads the name and labels of an object in a request body.
// Helm's clients send built-in kinds as protobuf, others as JSON.
func objectMeta(body []byte) (string, map[string]string) {
	if obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return m.GetName(), m.GetLabels()
		}
	}
	var obj struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return "", nil
	}
	return obj.Metadata.Name, obj.Metadata.Labels
}
