package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const (
	// resyncInterval bounds how long a pod can miss an event (a Secret that
	// appeared while its pod was being written, a start time kwok just set).
	resyncInterval = time.Second
	workers        = 2
	fieldManager   = "workload-simulator"
)

// Run simulates application behaviour for pods on kwok nodes until ctx is
// done: it sets each pod's gate annotation when the pod may proceed and
// creates the objects a pod declares. kwok's stages (KwokStages) do the
// status transitions. Run returns nil once ctx is done.
func Run(ctx context.Context, cfg *rest.Config) error {
	s, err := newSimulator(cfg)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

type simulator struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper

	factory    informers.SharedInformerFactory
	pods       corelisters.PodLister
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister

	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

func newSimulator(cfg *rest.Config) (*simulator, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = fieldManager
	// Bursts of pods (a chart with many Deployments) each need one write.
	cfg.QPS, cfg.Burst = 100, 200

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	s := &simulator{
		client:     client,
		dynamic:    dyn,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		factory:    factory,
		pods:       factory.Core().V1().Pods().Lister(),
		secrets:    factory.Core().V1().Secrets().Lister(),
		configMaps: factory.Core().V1().ConfigMaps().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "workload-simulator"},
		),
	}
	if err := s.addHandlers(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *simulator) addHandlers() error {
	// Only the keys of Secrets and ConfigMaps matter. Helm keeps releases in
	// Secrets, so caching values would grow with every release under test.
	if err := s.factory.Core().V1().Secrets().Informer().SetTransform(keysOnly); err != nil {
		return fmt.Errorf("trimming cached secrets: %w", err)
	}
	if err := s.factory.Core().V1().ConfigMaps().Informer().SetTransform(keysOnly); err != nil {
		return fmt.Errorf("trimming cached configmaps: %w", err)
	}
	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueuePod,
		UpdateFunc: func(_, obj any) { s.enqueuePod(obj) },
	}
	if _, err := s.factory.Core().V1().Pods().Informer().AddEventHandler(podHandler); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	// A new or changed Secret or ConfigMap may unblock pods in its namespace.
	inputHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueueNamespaceOf,
		UpdateFunc: func(_, obj any) { s.enqueueNamespaceOf(obj) },
	}
	if _, err := s.factory.Core().V1().Secrets().Informer().AddEventHandler(inputHandler); err != nil {
		return fmt.Errorf("watching secrets: %w", err)
	}
	if _, err := s.factory.Core().V1().ConfigMaps().Informer().AddEventHandler(inputHandler); err != nil {
		return fmt.Errorf("watching configmaps: %w", err)
	}
	return nil
}

func (s *simulator) run(ctx context.Context) error {
	defer s.queue.ShutDown()
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()

	for typ, synced := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !synced && ctx.Err() == nil {
			return fmt.Errorf("cache for %v did not sync", typ)
		}
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { s.resync(ctx) })

	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	return nil
}

func (s *simulator) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !needsWork(pod) {
		return
	}
	s.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
}

func (s *simulator) enqueueNamespaceOf(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	pods, err := s.pods.Pods(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pod := range pods {
		s.enqueuePod(pod)
	}
}

// resync re-examines every pod that can still move, for changes no event
// announces.
func (s *simulator) resync(ctx context.Context) {
	ticker := time.NewTicker(resyncInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		pods, err := s.pods.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, pod := range pods {
			s.enqueuePod(pod)
		}
	}
}

func (s *simulator) processNext(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)

	err := s.sync(ctx, key)
	if err == nil {
		s.queue.Forget(key)
		return true
	}
	logger := klog.FromContext(ctx)
	switch {
	case ctx.Err() != nil:
	case apierrors.IsConflict(err):
		logger.V(2).Info("retrying pod after a conflict", "pod", key)
	default:
		logger.Error(err, "simulating pod, will retry", "pod", key)
	}
	s.queue.AddRateLimited(key)
	return true
}

// sync applies the decision for one pod. Conflicts and vanished pods are not
// errors worth reporting: the next event or resync decides again from fresh
// state, and every step is idempotent.
func (s *simulator) sync(ctx context.Context, key types.NamespacedName) error {
	pod, err := s.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading pod from cache: %w", err)
	}

	d := decide(pod, s.lookup, time.Now())
	if d.requeueAfter > 0 {
		s.queue.AddAfter(key, d.requeueAfter)
	}
	if d.gate == "" {
		return nil
	}
	if err := s.createAll(ctx, pod, d.creates); err != nil {
		return err
	}
	return s.setGate(ctx, pod, d)
}

func (s *simulator) lookup(kind, namespace, name string) (sets.Set[string], bool) {
	switch kind {
	case kindSecret:
		secret, err := s.secrets.Secrets(namespace).Get(name)
		if err != nil {
			return nil, false
		}
		return sets.KeySet(secret.Data), true
	case kindConfigMap:
		cm, err := s.configMaps.ConfigMaps(namespace).Get(name)
		if err != nil {
			return nil, false
		}
		return sets.KeySet(cm.Data).Union(sets.KeySet(cm.BinaryData)), true
	default:
		return nil, false
	}
}

// setGate writes the gate with the pod's resourceVersion as a precondition,
// so a decision taken on a stale cache is rejected instead of applied.
func (s *simulator) setGate(ctx context.Context, pod *corev1.Pod, d decision) error {
	annotations := map[string]any{GateAnnotation: d.gate}
	if d.gate == GateBlocked {
		annotations[WaitingReasonAnnotation] = d.reason
		annotations[WaitingMessageAnnotation] = d.message
	} else {
		annotations[WaitingReasonAnnotation] = nil
		annotations[WaitingMessageAnnotation] = nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": pod.ResourceVersion,
			"annotations":     annotations,
		},
	})
	if err != nil {
		return fmt.Errorf("encoding gate patch: %w", err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting gate %s on pod %s/%s: %w", d.gate, pod.Namespace, pod.Name, err)
	}
	return nil
}

func (s *simulator) createAll(ctx context.Context, pod *corev1.Pod, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := s.create(ctx, pod.Namespace, obj.DeepCopy()); err != nil {
			return fmt.Errorf("creating %s %s declared by pod %s/%s: %w",
				obj.GetKind(), obj.GetName(), pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

// create makes the object exist; an object that already exists counts as
// created, since a retried or parallel pod declares the same one.
func (s *simulator) create(ctx context.Context, namespace string, obj *unstructured.Unstructured) error {
	mapping, err := s.restMapping(obj)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = s.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		ri = s.dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// restMapping refreshes discovery once on a miss: the kind may come from a
// CRD installed after the simulator started.
func (s *simulator) restMapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset()
		mapping, err = s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	return mapping, nil
}

// keysOnly drops the values (and managed fields) of cached Secrets and
// ConfigMaps, keeping their keys.
func keysOnly(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		o.ManagedFields = nil
		for k := range o.Data {
			o.Data[k] = nil
		}
	case *corev1.ConfigMap:
		o.ManagedFields = nil
		for k := range o.Data {
			o.Data[k] = ""
		}
		for k := range o.BinaryData {
			o.BinaryData[k] = nil
		}
	}
	return obj, nil
}
