package kubeclient

import (
	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Create creates resources as Helm's client does, without the annotations
// the API server would refuse (see sequencing.StripUnappliable).
func (c *Client) Create(resources helmkube.ResourceList, opts ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
	stripUnappliable(resources)
	return c.Client.Create(resources, opts...)
}

// Update applies target as Helm's client does, without the annotations the
// API server would refuse, on either side: a client-side three-way merge
// compares the two.
func (c *Client) Update(original, target helmkube.ResourceList, opts ...helmkube.ClientUpdateOption) (*helmkube.Result, error) {
	stripUnappliable(original)
	stripUnappliable(target)
	return c.Client.Update(original, target, opts...)
}

func stripUnappliable(list helmkube.ResourceList) {
	for _, info := range list {
		stripInfo(info)
	}
}

func stripInfo(info *resource.Info) {
	if info != nil && info.Object != nil {
		sequencing.StripUnappliable(info.Object)
	}
}
