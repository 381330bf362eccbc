package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/afterhooks/helm-controller/test/cluster"
)

const (
	// upTimeout bounds how long `up` waits for `serve`; Start gives up
	// sooner and then `serve` exits with the reason.
	upTimeout = cluster.DefaultTimeout + 30*time.Second
	// downTimeout is how long `down` waits for `serve` to stop the cluster.
	downTimeout = 30 * time.Second
)

// up starts `serve` detached and waits until it reports the cluster ready.
func up(ctx context.Context, dir string, o options, out io.Writer) error {
	st := newState(dir)
	if pid, ok := st.running(); ok {
		// Possibly still starting (another `up`): wait for it like that one.
		if err := waitReady(ctx, st, nil); err != nil {
			return fmt.Errorf("cluster in %s (pid %d): %w", dir, pid, err)
		}
		fmt.Fprintf(out, "cluster already running in %s (pid %d)\n%s\n", dir, pid, st.kubeconfig())
		return nil
	}
	if err := st.reset(); err != nil {
		return err
	}
	serveLog, err := os.Create(st.serveLog())
	if err != nil {
		return fmt.Errorf("creating serve log: %w", err)
	}
	defer serveLog.Close()

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating own executable: %w", err)
	}
	args := []string{"serve", "--dir", dir, "--nodes", strconv.Itoa(o.nodes), "--crds", o.crdDirs}
	if o.name != "" {
		args = append(args, "--name", o.name)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = serveLog, serveLog
	// A session of its own: the cluster survives the terminal, make and
	// `go run` that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitReady(ctx, st, exited); err != nil {
		// Nothing useful may keep running after a failed start.
		_ = cmd.Process.Kill()
		return fmt.Errorf("%w; log %s:\n%s", err, st.serveLog(), tail(st.serveLog()))
	}
	fmt.Fprintln(out, st.kubeconfig())
	return nil
}

func waitReady(ctx context.Context, st state, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if st.ready() {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("cluster failed to start (serve exited: %v)", err)
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready after %s", upTimeout)
		case <-ticker.C:
		}
	}
}

// serve runs the cluster in the foreground until SIGTERM, SIGINT or SIGHUP.
func serve(ctx context.Context, dir string, o options, out io.Writer) error {
	st := newState(dir)
	if err := st.writePID(os.Getpid()); err != nil {
		return err
	}
	defer st.clear()

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{
		Name:         o.name,
		Dir:          dir,
		Nodes:        o.nodes,
		ExtraCRDDirs: o.extraCRDDirs(),
		Logs:         out,
	})
	if err != nil {
		return err
	}
	if err := st.markReady(); err != nil {
		return errors.Join(err, c.Stop())
	}
	fmt.Fprintf(out, "serving; API server %s, artifacts %s\n", c.APIServerURL(), c.SourceControllerStorageURL())

	var failure error
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "signal received, stopping")
	case <-c.Done():
		failure = c.Err()
	}
	return errors.Join(failure, c.Stop())
}

// down signals `serve` and waits for it to stop the cluster.
func down(dir string, out io.Writer) error {
	st := newState(dir)
	pid, ok := st.running()
	if !ok {
		st.clear()
		fmt.Fprintf(out, "no cluster running in %s\n", dir)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling serve (pid %d): %w", pid, err)
	}
	if !waitGone(pid, downTimeout) {
		// The components die with serve: they carry a parent-death signal.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitGone(pid, 5*time.Second) {
			return fmt.Errorf("serve (pid %d) did not exit", pid)
		}
	}
	st.clear()
	fmt.Fprintf(out, "cluster in %s stopped\n", dir)
	return nil
}

// status prints whether the cluster runs and answers; not running is exit 1.
func status(ctx context.Context, dir string, out io.Writer) error {
	st := newState(dir)
	pid, ok := st.running()
	if !ok {
		fmt.Fprintf(out, "no cluster running in %s\n", dir)
		return exitCode(1)
	}
	if !st.ready() {
		fmt.Fprintf(out, "cluster in %s starting (pid %d)\n", dir, pid)
		return nil
	}
	version, err := serverVersion(ctx, st.kubeconfig())
	if err != nil {
		fmt.Fprintf(out, "cluster in %s running (pid %d) but not answering: %v\n", dir, pid, err)
		return exitCode(1)
	}
	fmt.Fprintf(out, "cluster in %s running (pid %d), Kubernetes %s\nkubeconfig: %s\n", dir, pid, version, st.kubeconfig())
	return nil
}

func serverVersion(ctx context.Context, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating client: %w", err)
	}
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return "", fmt.Errorf("readyz: %w", err)
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	return v.GitVersion, nil
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !alive(pid)
}

func absDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	return abs, nil
}
