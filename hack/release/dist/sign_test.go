package dist

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestSignAndVerify signs an image index in an in-process registry with a
// cosign key and verifies it with cosign's verifier; an image that was
// swapped under the tag, a signature copied onto another image, and another
// key all fail to verify.
func TestSignAndVerify(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	image := host + "/afterhooks/helm-controller:v0.1.0"

	push := func(ref string) string {
		t.Helper()
		idx, err := random.Index(128, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Push(ctx, idx, ref); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		return d.String()
	}
	built := push(image)

	password := []byte("correct horse")
	priv, pub, err := GenerateSigningKey(password)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(priv), "ENCRYPTED SIGSTORE PRIVATE KEY") {
		t.Fatalf("the private key is not cosign's encrypted PEM:\n%s", priv)
	}

	if _, err := Sign(ctx, SignOptions{Image: image, KeyPEM: priv, Password: []byte("wrong")}); err == nil {
		t.Error("signing with a wrong password succeeded")
	}
	if _, err := Sign(ctx, SignOptions{Image: image, WantDigest: "sha256:" + strings.Repeat("0", 64), KeyPEM: priv, Password: password}); err == nil {
		t.Error("signed an image whose digest is not the build's")
	}
	signed, err := Sign(ctx, SignOptions{Image: image, WantDigest: built, KeyPEM: priv, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if signed.DigestStr() != built {
		t.Fatalf("signed %s, built %s", signed, built)
	}
	sigTag := host + "/afterhooks/helm-controller:" + strings.Replace(built, ":", "-", 1) + ".sig"
	if _, err := remote.Head(mustRef(t, sigTag)); err != nil {
		t.Fatalf("no signature at cosign's tag %s: %v", sigTag, err)
	}

	if _, err := Verify(ctx, image, pub); err != nil {
		t.Fatalf("the signed image does not verify: %v", err)
	}
	if _, err := Verify(ctx, host+"/afterhooks/helm-controller@"+built, pub); err != nil {
		t.Fatalf("the signed digest does not verify: %v", err)
	}

	t.Run("another key", func(t *testing.T) {
		_, otherPub, err := GenerateSigningKey(password)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ctx, image, otherPub); err == nil {
			t.Error("verified with a key that did not sign")
		}
	})

	t.Run("image swapped under the tag", func(t *testing.T) {
		tampered := push(image)
		if tampered == built {
			t.Fatal("the random image equals the signed one")
		}
		if _, err := Verify(ctx, image, pub); err == nil {
			t.Error("an unsigned image pushed under the signed tag verified")
		}
		// The signed digest itself still verifies.
		if _, err := Verify(ctx, host+"/afterhooks/helm-controller@"+built, pub); err != nil {
			t.Errorf("the signed digest no longer verifies: %v", err)
		}
	})

	t.Run("signature copied onto another image", func(t *testing.T) {
		other := host + "/afterhooks/helm-controller:other"
		otherDigest := push(other)
		sig, err := remote.Get(mustRef(t, sigTag))
		if err != nil {
			t.Fatal(err)
		}
		sigImg, err := sig.Image()
		if err != nil {
			t.Fatal(err)
		}
		copied := host + "/afterhooks/helm-controller:" + strings.Replace(otherDigest, ":", "-", 1) + ".sig"
		if err := remote.Write(mustRef(t, copied), sigImg); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ctx, other, pub); err == nil {
			t.Error("a signature of another digest verified")
		}
	})
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
