package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
)

const (
	// fleetNamespace holds the HelmRepository and every HelmRelease.
	fleetNamespace = "bench"
	repositoryName = "charts"
	// clusterNodes spreads the podinfo pods over a few fake nodes, as a
	// small real cluster would.
	clusterNodes      = 3
	repositoryTimeout = 2 * time.Minute
)

// environment is everything a run needs besides the controller: a fresh
// cluster, a chart server with podinfo and a Ready HelmRepository.
type environment struct {
	cluster *cluster.Cluster
	charts  *chartserver.Server
	client  client.Client
	// apiServer reaches non-resource paths such as /metrics.
	apiServer rest.Interface
	podinfo   chartserver.ChartRef
	// waitStrategy, when set, is the fleet's install and upgrade
	// waitStrategy.
	waitStrategy v2.HookWaitStrategy
	// shards, when set, spreads the fleet over that many shard keys.
	shards int
	// interval is every release's spec.interval.
	interval time.Duration
}

// startEnvironment brings everything up; on error nothing is left running.
func startEnvironment(ctx context.Context, opts Options, progress io.Writer) (env *environment, err error) {
	env = &environment{interval: opts.Interval}
	defer func() {
		if err != nil {
			err = errors.Join(err, env.stop())
			env = nil
		}
	}()
	began := time.Now()
	env.cluster, err = cluster.Start(ctx, cluster.Options{
		Name:         "bench",
		Nodes:        clusterNodes,
		BinDir:       opts.ToolBinDir,
		ExtraCRDDirs: []string{filepath.Join(opts.RepoRoot, "config", "crd", "bases")},
	})
	if err != nil {
		return env, fmt.Errorf("starting the cluster: %w", err)
	}
	fmt.Fprintf(progress, "cluster ready in %s\n", time.Since(began).Round(100*time.Millisecond))
	if err := env.connect(); err != nil {
		return env, err
	}
	if err := env.publishChart(ctx, opts.ChartDir); err != nil {
		return env, err
	}
	if err := env.createRepository(ctx); err != nil {
		return env, err
	}
	return env, nil
}

func (env *environment) connect() error {
	cfg := env.cluster.RESTConfig()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	env.client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the cluster client: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the API server client: %w", err)
	}
	env.apiServer = clientset.Discovery().RESTClient()
	return nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, v2.AddToScheme, sourcev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the client scheme: %w", err)
		}
	}
	return scheme, nil
}

func (env *environment) publishChart(ctx context.Context, chartDir string) error {
	var err error
	// The server stops with the run's context as well as with stop.
	env.charts, err = chartserver.Start(ctx)
	if err != nil {
		return fmt.Errorf("starting the chart server: %w", err)
	}
	env.podinfo, err = env.charts.AddChart(chartDir)
	if err != nil {
		return fmt.Errorf("publishing %s: %w", chartDir, err)
	}
	return nil
}

// createRepository creates the namespace and the HelmRepository, and waits
// until source-controller has fetched its index.
func (env *environment) createRepository(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}
	if err := env.client.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", fleetNamespace, err)
	}
	repo := &sourcev1.HelmRepository{
		ObjectMeta: metav1.ObjectMeta{Name: repositoryName, Namespace: fleetNamespace},
		Spec: sourcev1.HelmRepositorySpec{
			URL: env.charts.HelmRepositoryURL(),
			// Longer than any run, so the index is fetched once.
			Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	if err := env.client.Create(ctx, repo); err != nil {
		return fmt.Errorf("creating HelmRepository %s/%s: %w", fleetNamespace, repositoryName, err)
	}
	return env.waitRepositoryReady(ctx, repo)
}

func (env *environment) waitRepositoryReady(ctx context.Context, repo *sourcev1.HelmRepository) error {
	what := fmt.Sprintf("HelmRepository %s/%s Ready", repo.Namespace, repo.Name)
	ctx, cancel := withTimeout(ctx, repositoryTimeout, what)
	defer cancel()
	var ready *metav1.Condition
	err := pollEvery(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return false, fmt.Errorf("reading HelmRepository %s/%s: %w", repo.Namespace, repo.Name, err)
		}
		ready = apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		return repo.Status.ObservedGeneration == repo.Generation &&
			ready != nil && ready.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last Ready condition: %s; source-controller log: %s)",
			err, describeCondition(ready), env.cluster.LogFile("source-controller"))
	}
	return nil
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// stop ends the chart server and the cluster; the cluster removes its
// own directory.
func (env *environment) stop() error {
	var errs []error
	if env.charts != nil {
		if err := env.charts.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the chart server: %w", err))
		}
	}
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the cluster: %w", err))
		}
	}
	return errors.Join(errs...)
}
