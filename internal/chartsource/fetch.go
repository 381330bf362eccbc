package chartsource

import (
	"context"
	// Linked so that go-digest can verify sha256, sha384 and sha512 digests.
	_ "crypto/sha256"
	_ "crypto/sha512"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/opencontainers/go-digest"
	// Registers blake3, which source-controller --artifact-digest-algo=blake3
	// and --snapshot-digest-algo=blake3 use.
	_ "github.com/opencontainers/go-digest/blake3"
)

var (
	// ErrNotFound means source-controller does not serve the artifact (HTTP
	// 404), typically because it was garbage collected after a newer
	// revision was stored. Retrying the same URL will not help; the source
	// object's status will point to a new artifact.
	ErrNotFound = errors.New("artifact not found")

	// ErrDigestMismatch means the downloaded bytes differ from the digest the
	// source object advertises, e.g. because the artifact was replaced
	// between reading the status and downloading.
	ErrDigestMismatch = errors.New("artifact digest mismatch")

	errTooLarge = errors.New("artifact too large")
)

// StatusError is an unexpected HTTP status from source-controller. It
// matches ErrNotFound with errors.Is when the status is 404.
type StatusError struct {
	URL        string
	StatusCode int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: unexpected HTTP status %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
}

func (e *StatusError) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound
}

func newClient(retries int, timeout time.Duration) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = retries
	c.HTTPClient.Timeout = timeout
	c.CheckRetry = checkRetry
	c.ErrorHandler = giveUp
	c.RequestLogHook = logRetry
	return c
}

// checkRetry keeps the default policy (network errors, 429 and 5xx, but not
// 4xx) and adds that an oversized artifact will not shrink by retrying.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if errors.Is(err, errTooLarge) {
		return false, err
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// giveUp replaces retryablehttp's generic "giving up" error, which hides the
// status code, with one the caller can inspect.
func giveUp(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if err == nil {
			err = &StatusError{URL: resp.Request.URL.String(), StatusCode: resp.StatusCode}
		}
	}
	if err == nil {
		err = errors.New("request failed")
	}
	if attempts > 1 {
		return nil, fmt.Errorf("%w (gave up after %d attempts)", err, attempts)
	}
	return nil, err
}

func logRetry(_ retryablehttp.Logger, req *http.Request, retry int) {
	if retry > 0 {
		logr.FromContextOrDiscard(req.Context()).V(1).Info("retrying chart artifact download",
			"url", req.URL.String(), "attempt", retry+1)
	}
}

// download reads the whole body inside the retry loop, so a connection that
// breaks mid-transfer is retried like one that fails to connect.
func (s *Source) download(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := s.artifactURL(rawURL)
	if err != nil {
		return nil, err
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("invalid artifact URL %q: %w", u, err)
	}
	var body []byte
	req.SetResponseHandler(func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return nil
		}
		defer resp.Body.Close()
		b, err := readLimited(resp.Body, resp.ContentLength, s.maxSize)
		if err != nil {
			return fmt.Errorf("GET %s: %w", u, err)
		}
		body = b
		return nil
	})

	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, &StatusError{URL: u, StatusCode: resp.StatusCode}
	}
	return body, nil
}

func readLimited(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes exceed the limit of %d bytes", errTooLarge, contentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	}
	return b, nil
}

func (s *Source) artifactURL(raw string) (string, error) {
	if s.hostOverride == "" {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid artifact URL %q: %w", raw, err)
	}
	u.Host = s.hostOverride
	return u.String(), nil
}

func parseDigest(s string) (digest.Digest, error) {
	if s == "" {
		return "", errors.New("artifact has no digest")
	}
	d, err := digest.Parse(s)
	if errors.Is(err, digest.ErrDigestUnsupported) {
		alg, _, _ := strings.Cut(s, ":")
		return "", fmt.Errorf("digest %q: algorithm %q is not supported (supported: sha256, sha384, sha512, blake3)", s, alg)
	}
	if err != nil {
		return "", fmt.Errorf("invalid digest %q: %w", s, err)
	}
	return d, nil
}
