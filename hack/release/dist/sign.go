package dist

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Signing follows cosign's key-based scheme, with cosign's own library, so
// `cosign verify --key cosign.pub --insecure-ignore-tlog` accepts what Sign
// writes: the signed payload is the simple-signing document naming the
// image's digest, stored in the registry under the tag sha256-<hex>.sig.
// Nothing is sent to a transparency log (Rekor) and no certificate is
// requested (Fulcio): keyless signing needs an OIDC issuer, and this build
// runs offline.

// GenerateSigningKey returns a new cosign key pair: the private key
// encrypted with password (cosign's "ENCRYPTED SIGSTORE PRIVATE KEY" PEM, as
// `cosign generate-key-pair` writes cosign.key) and the public key PEM.
func GenerateSigningKey(password []byte) (privatePEM, publicPEM []byte, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("generating a cosign key pair: %w", err)
	}
	return keys.PrivateBytes, keys.PublicBytes, nil
}

// SignOptions say what to sign and how to reach the registry.
type SignOptions struct {
	// Image is the reference in the registry, by tag or digest.
	Image string
	// WantDigest, when set, is the digest the reference must resolve to:
	// the digest of the build being released, so a tag moved in the
	// registry is never signed by mistake.
	WantDigest string
	// KeyPEM and Password are a cosign private key file and its password.
	KeyPEM, Password []byte
	// Remote adds options for the registry client; the local Docker/Podman
	// credentials are always used.
	Remote []remote.Option
}

// Sign signs the image's digest with a cosign key and writes the signature
// to the registry next to the image. It returns the digest reference signed.
func Sign(ctx context.Context, o SignOptions) (name.Digest, error) {
	digest, err := resolveDigest(ctx, o.Image, o.Remote)
	if err != nil {
		return name.Digest{}, err
	}
	if o.WantDigest != "" && digest.DigestStr() != o.WantDigest {
		return name.Digest{}, fmt.Errorf("%s is %s in the registry, not the build's %s: push the build first", o.Image, digest.DigestStr(), o.WantDigest)
	}
	signer, err := cosign.LoadPrivateKey(o.KeyPEM, o.Password, nil)
	if err != nil {
		return name.Digest{}, fmt.Errorf("loading the cosign private key: %w", err)
	}
	body, err := payload.Cosign{Image: digest, ClaimedIdentity: o.Image}.MarshalJSON()
	if err != nil {
		return name.Digest{}, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return name.Digest{}, fmt.Errorf("signing %s: %w", digest, err)
	}
	ociSig, err := static.NewSignature(body, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		return name.Digest{}, err
	}
	ropts := ociremote.WithRemoteOptions(remoteOptions(ctx, o.Remote)...)
	entity, err := ociremote.SignedEntity(digest, ropts)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading %s: %w", digest, err)
	}
	signed, err := mutate.AttachSignatureToEntity(entity, ociSig)
	if err != nil {
		return name.Digest{}, err
	}
	if err := ociremote.WriteSignatures(digest.Repository, signed, ropts); err != nil {
		return name.Digest{}, fmt.Errorf("writing the signature of %s: %w", digest, err)
	}
	return digest, nil
}

// Verify checks, with cosign's verifier, that the image the reference
// resolves to carries a signature by the public key whose payload names
// that very digest. Transparency log and certificate checks are off, as
// for `cosign verify --key … --insecure-ignore-tlog`.
func Verify(ctx context.Context, image string, publicPEM []byte, extra ...remote.Option) (name.Digest, error) {
	digest, err := resolveDigest(ctx, image, extra)
	if err != nil {
		return name.Digest{}, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(publicPEM)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading the public key: %w", err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return name.Digest{}, fmt.Errorf("loading the public key: %w", err)
	}
	_, _, err = cosign.VerifyImageSignatures(ctx, digest, &cosign.CheckOpts{
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remoteOptions(ctx, extra)...)},
		SigVerifier:        verifier,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
	})
	if err != nil {
		return digest, fmt.Errorf("verifying %s: %w", digest, err)
	}
	return digest, nil
}

func resolveDigest(ctx context.Context, image string, extra []remote.Option) (name.Digest, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return name.Digest{}, fmt.Errorf("parsing %q: %w", image, err)
	}
	if d, ok := ref.(name.Digest); ok {
		return d, nil
	}
	desc, err := remote.Head(ref, remoteOptions(ctx, extra)...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("resolving %s: %w", ref, err)
	}
	return ref.Context().Digest(desc.Digest.String()), nil
}

func remoteOptions(ctx context.Context, extra []remote.Option) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, extra...)
}
