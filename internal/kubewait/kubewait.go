// Package kubewait gets a waiter from a Helm kube client. Every wrapper of
// Helm's kube client (recreate, afterhooks, sequencing) and the action
// layer ask the client they wrap for a waiter with wait options (a
// context, status readers), and Helm's interface only takes options on
// clients that implement kube.InterfaceWaitOptions: this is the one place
// that tells the two apart.
package kubewait

import "helm.sh/helm/v4/pkg/kube"

// Waiter returns kc's waiter for strategy with opts, or without them when
// kc takes no wait options.
func Waiter(kc kube.Interface, strategy kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	if wo, ok := kc.(kube.InterfaceWaitOptions); ok {
		return wo.GetWaiterWithOptions(strategy, opts...)
	}
	return kc.GetWaiter(strategy)
}

// Named is list's objects as a WaitError names them, without a status.
func Named(list kube.ResourceList) []NotReady {
	out := make([]NotReady, 0, len(list))
	for _, info := range list {
		kind := info.Object.GetObjectKind().GroupVersionKind().Kind
		if kind == "" && info.Mapping != nil {
			kind = info.Mapping.GroupVersionKind.Kind
		}
		out = append(out, NotReady{Kind: kind, Namespace: info.Namespace, Name: info.Name})
	}
	return out
}
