package module

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// DefaultSignatureName names the signature kyma alpha sign adds; SignatureIssuer is the issuer
// it records. Both as the real Kyma CLI writes them.
const (
	DefaultSignatureName = "kyma-module-signature"
	SignatureIssuer      = "kyma-cli"
)

// Errors of Verify, for errors.Is.
var (
	ErrNoSignature      = errors.New("no signature")
	ErrBadSignature     = errors.New("signature does not match")
	ErrDigestMismatch   = errors.New("descriptor digest does not match")
	ErrContentTampering = errors.New("content changed")
)

// Sign adds (or replaces) the named signature: RSASSA-PKCS1-v1_5 over the SHA-512 digest of the
// normalised descriptor. The local blobs' digests are part of the descriptor, so the signature
// covers every layer.
func (a *Artifact) Sign(name string, key *rsa.PrivateKey) error {
	if name == "" {
		name = DefaultSignatureName
	}
	if err := a.checkBlobs(); err != nil {
		return fmt.Errorf("sign %s: %w", a.Descriptor.Component.Name, err)
	}
	sum, err := normalisedDigest(a.Descriptor)
	if err != nil {
		return err
	}
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA512, sum)
	if err != nil {
		return fmt.Errorf("sign %s: %w", a.Descriptor.Component.Name, err)
	}
	entry := Signature{
		Name:      name,
		Digest:    DigestSpec{HashAlgorithm: HashSHA512, NormalisationAlgorithm: NormalisationJSONV1, Value: hex.EncodeToString(sum)},
		Signature: SignatureSpec{Algorithm: SignatureAlgorithmRSAPKCS1v5, Value: hex.EncodeToString(sig), MediaType: MediaTypeRSASignature, Issuer: SignatureIssuer},
	}
	sigs := a.Descriptor.Signatures[:0:0]
	for _, s := range a.Descriptor.Signatures {
		if s.Name != name {
			sigs = append(sigs, s)
		}
	}
	a.Descriptor.Signatures = append(sigs, entry)
	return nil
}

// Verify checks the named signature (any name if empty) with key and that every local blob has
// the content the descriptor records. Errors name what failed: the missing signature, the
// resource and layer whose content changed, or the key the signature does not verify with.
func (a *Artifact) Verify(name string, key *rsa.PublicKey) error {
	comp := a.Descriptor.Component.Name + ":" + a.Descriptor.Component.Version
	var sig *Signature
	for i := range a.Descriptor.Signatures {
		if name == "" || a.Descriptor.Signatures[i].Name == name {
			sig = &a.Descriptor.Signatures[i]
			break
		}
	}
	if sig == nil {
		if name == "" {
			return fmt.Errorf("verify %s: %w", comp, ErrNoSignature)
		}
		return fmt.Errorf("verify %s: %w named %q", comp, ErrNoSignature, name)
	}
	if err := a.checkBlobs(); err != nil {
		return fmt.Errorf("verify %s: %w", comp, err)
	}
	// The Kyma CLI signs SHA-512 digests; OCM's CLI SHA-256 unless told otherwise (--hash).
	var hash crypto.Hash
	var sumOf func([]byte) []byte
	switch sig.Digest.HashAlgorithm {
	case HashSHA512:
		hash, sumOf = crypto.SHA512, func(b []byte) []byte { s := sha512.Sum512(b); return s[:] }
	case HashSHA256:
		hash, sumOf = crypto.SHA256, func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	}
	if hash == 0 || sig.Signature.Algorithm != SignatureAlgorithmRSAPKCS1v5 {
		return fmt.Errorf("verify %s: signature %q uses %s/%s, want %s or %s with %s", comp, sig.Name,
			sig.Digest.HashAlgorithm, sig.Signature.Algorithm, HashSHA512, HashSHA256, SignatureAlgorithmRSAPKCS1v5)
	}
	// OCM signs with jsonNormalisation/v3 (or v2) by default today; the Kyma CLI with v1.
	norm, err := NormaliseWith(a.Descriptor, sig.Digest.NormalisationAlgorithm)
	if err != nil {
		return fmt.Errorf("verify %s: signature %q: %w", comp, sig.Name, err)
	}
	sum := sumOf(norm)
	if hex.EncodeToString(sum) != sig.Digest.Value {
		return fmt.Errorf("verify %s: signature %q: %w (the descriptor changed after signing)", comp, sig.Name, ErrDigestMismatch)
	}
	value, err := hex.DecodeString(sig.Signature.Value)
	if err != nil {
		return fmt.Errorf("verify %s: signature %q: value is not hex: %w", comp, sig.Name, err)
	}
	if err := rsa.VerifyPKCS1v15(key, hash, sum, value); err != nil {
		return fmt.Errorf("verify %s: signature %q with key %s: %w", comp, sig.Name, KeyFingerprint(key), ErrBadSignature)
	}
	return nil
}

// checkBlobs checks every local blob against the digest its resource records.
func (a *Artifact) checkBlobs() error {
	for _, r := range a.Descriptor.Component.Resources {
		if r.Access.Type != AccessTypeLocalBlob {
			continue
		}
		ref := digest.Digest(r.Access.LocalReference)
		b, ok := a.Blobs[ref]
		if !ok {
			return fmt.Errorf("resource %s: layer %s missing", r.Name, ref)
		}
		got := digest.FromBytes(b.Data)
		if got != ref || r.Digest == nil || r.Digest.Value != got.Encoded() {
			return fmt.Errorf("resource %s: layer %s: %w (its content now has digest %s)", r.Name, ref, ErrContentTampering, got)
		}
	}
	return nil
}

func normalisedDigest(cd *ComponentDescriptor) ([]byte, error) {
	norm, err := Normalise(cd)
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512(norm)
	return sum[:], nil
}

// KeyFingerprint names a public key: the SHA-256 digest of its PKIX encoding, shortened.
func KeyFingerprint(key *rsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "unknown"
	}
	return digest.FromBytes(der).Encoded()[:16]
}

// LoadPrivateKey reads an RSA private key (PEM: PKCS#1 or PKCS#8).
func LoadPrivateKey(file string) (*rsa.PrivateKey, error) {
	block, err := readPEM(file)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key %s: not an RSA private key: %w", file, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key %s: not an RSA key", file)
	}
	return rk, nil
}

// LoadPublicKey reads an RSA public key (PEM: PKIX or PKCS#1), or takes it from a private key.
func LoadPublicKey(file string) (*rsa.PublicKey, error) {
	block, err := readPEM(file)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PublicKey); ok {
			return rk, nil
		}
		return nil, fmt.Errorf("key %s: not an RSA key", file)
	}
	if k, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
		return k, nil
	}
	priv, err := LoadPrivateKey(file)
	if err != nil {
		return nil, fmt.Errorf("key %s: not an RSA public or private key", file)
	}
	return &priv.PublicKey, nil
}

func readPEM(file string) (*pem.Block, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("key %s: no PEM block", file)
	}
	return block, nil
}

// ErrKeyExists is returned when a key file exists and overwriting was not asked for.
var ErrKeyExists = errors.New("key file exists")

// WriteKeyPair writes a new RSA key pair as PEM files: the private key (PKCS#1) always with mode
// 0600, whatever a file there had, the public key (PKIX) 0644. Existing files are replaced only
// with force; one path for both keys is refused.
func WriteKeyPair(privateFile, publicFile string, bits int, force bool) error {
	if privateFile == "" || publicFile == "" {
		return errors.New("create key: give both key files")
	}
	privAbs, err := filepath.Abs(privateFile)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	pubAbs, err := filepath.Abs(publicFile)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	if privAbs == pubAbs {
		return fmt.Errorf("create key: private and public key are the same file %s", privateFile)
	}
	pi, perr := os.Stat(privateFile)
	ui, uerr := os.Stat(publicFile)
	if perr == nil && uerr == nil && os.SameFile(pi, ui) {
		return fmt.Errorf("create key: %s and %s are the same file", privateFile, publicFile)
	}
	if !force {
		for _, f := range []struct {
			name string
			err  error
		}{{privateFile, perr}, {publicFile, uerr}} {
			if f.err == nil {
				return fmt.Errorf("create key: %s: %w (use --force to replace it)", f.name, ErrKeyExists)
			}
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := writeFileAtomic(privateFile, priv, 0o600); err != nil {
		return fmt.Errorf("write private key: %w", err)
	}
	if err := writeFileAtomic(publicFile, pub, 0o644); err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	return nil
}

// writeFileAtomic writes a new file next to name with mode perm and renames it over name, so
// the result has perm (a pre-existing file's mode does not survive) and is never half written.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
