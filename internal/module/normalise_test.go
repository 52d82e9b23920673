package module

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OCM's own jsonNormalisation/v1 vectors (testdata/ocm-normalisation.json names their source):
// the normalised bytes must be OCM's, byte for byte.
func TestNormaliseMatchesOCMVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/ocm-normalisation.json")
	require.NoError(t, err)
	var fx struct {
		Vectors []struct {
			Name       string          `json:"name"`
			Algorithm  string          `json:"algorithm"`
			Descriptor json.RawMessage `json:"descriptor"`
			Normalised string          `json:"normalised"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	require.Len(t, fx.Vectors, 11)
	for _, v := range fx.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			cd, err := ParseDescriptor(v.Descriptor)
			require.NoError(t, err)
			got, err := NormaliseWith(cd, v.Algorithm)
			require.NoError(t, err)
			assert.Equal(t, v.Normalised, string(got))

			// A re-write (YAML, as in the archive) changes neither the normalised form nor
			// any field OCM wrote.
			y, err := cd.MarshalYAML()
			require.NoError(t, err)
			again, err := ParseDescriptor(y)
			require.NoError(t, err)
			got2, err := NormaliseWith(again, v.Algorithm)
			require.NoError(t, err)
			assert.Equal(t, v.Normalised, string(got2))
			j1, err := json.Marshal(cd)
			require.NoError(t, err)
			assert.JSONEq(t, string(v.Descriptor), string(j1), "every field survives a re-write")
		})
	}
}

// What OCM leaves out of the signed form leaves the digest alone; what it keeps changes it.
func TestNormaliseExclusions(t *testing.T) {
	base := createSample(t, "norm", "1.0.0", "registry.example").Descriptor
	digestOf := func(cd *ComponentDescriptor) string {
		n, err := Normalise(cd)
		require.NoError(t, err)
		return string(n)
	}
	want := digestOf(base)
	mutate := func(f func(cd *ComponentDescriptor)) string {
		raw, err := json.Marshal(base)
		require.NoError(t, err)
		cd, err := ParseDescriptor(raw)
		require.NoError(t, err)
		f(cd)
		return digestOf(cd)
	}
	same := map[string]func(*ComponentDescriptor){
		"repository context": func(cd *ComponentDescriptor) {
			cd.Component.RepositoryContexts = append(cd.Component.RepositoryContexts, RepositoryContext{Type: RepositoryTypeOCI, BaseURL: "other.example"})
		},
		"source": func(cd *ComponentDescriptor) {
			cd.Component.Sources = append(cd.Component.Sources, Source{Name: "git", Type: "git", Version: "1", Access: &Access{Type: "gitHub"}})
		},
		"access": func(cd *ComponentDescriptor) {
			cd.Component.Resources[0].Access.Extra = Extra{"globalAccess": json.RawMessage(`{"type":"ociBlob"}`)}
		},
		"unsigned label": func(cd *ComponentDescriptor) {
			cd.Component.Resources[0].Labels = append(cd.Component.Resources[0].Labels, Label{Name: "x", Value: "y"})
		},
		"signature": func(cd *ComponentDescriptor) {
			cd.Signatures = append(cd.Signatures, Signature{Name: "s"})
		},
		"field OCM does not read": func(cd *ComponentDescriptor) {
			cd.Component.Extra = Extra{"somethingElse": json.RawMessage(`1`)}
		},
	}
	for name, f := range same {
		assert.Equal(t, want, mutate(f), name)
	}
	differ := map[string]func(*ComponentDescriptor){
		"signed label":   func(cd *ComponentDescriptor) { cd.Component.Labels[0].Value = "other" },
		"digest":         func(cd *ComponentDescriptor) { cd.Component.Resources[0].Digest.Value = "00" },
		"extra identity": func(cd *ComponentDescriptor) { cd.Component.Resources[0].ExtraIdentity = map[string]string{"a": "b"} },
		"provider":       func(cd *ComponentDescriptor) { cd.Component.Provider = "someone" },
	}
	for name, f := range differ {
		assert.NotEqual(t, want, mutate(f), name)
	}
	assert.Contains(t, want, `{"extraIdentity":null}`)
	assert.NotContains(t, want, `{"sources"`)
}

func TestCanonicalJSONEscapes(t *testing.T) {
	got, err := canonicalJSON(map[string]any{"a": "<&>\u2028\\u2028\n"})
	require.NoError(t, err)
	assert.Equal(t, "{\"a\":\"<&>\u2028\\\\u2028\\n\"}", string(got))
	_, err = NormaliseWith(&ComponentDescriptor{}, "jsonNormalisation/v9")
	assert.ErrorContains(t, err, "not supported")
}

// A signature as current OCM makes it (jsonNormalisation/v3, or v2) verifies; a changed signed
// label breaks it.
func TestVerifyOCMv3Signature(t *testing.T) {
	for _, algo := range []string{NormalisationJSONV2, NormalisationJSONV3} {
		a := createSample(t, "ocmsigned", "1.0.0", "registry.example")
		key := newKey(t)
		norm, err := NormaliseWith(a.Descriptor, algo)
		require.NoError(t, err)
		sum := sha512.Sum512(norm)
		sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA512, sum[:])
		require.NoError(t, err)
		a.Descriptor.Signatures = []Signature{{Name: "ocm",
			Digest:    DigestSpec{HashAlgorithm: HashSHA512, NormalisationAlgorithm: algo, Value: hex.EncodeToString(sum[:])},
			Signature: SignatureSpec{Algorithm: SignatureAlgorithmRSAPKCS1v5, Value: hex.EncodeToString(sig), MediaType: MediaTypeRSASignature}}}
		require.NoError(t, a.Verify("ocm", &key.PublicKey), algo)
		a.Descriptor.Component.Labels[0].Value = "other"
		assert.True(t, errors.Is(a.Verify("ocm", &key.PublicKey), ErrDigestMismatch), algo)
	}
}

// A signature made with OCM's CLI defaults (testdata/external-facts.json, ocm.signDefaults:
// SHA-256, RSASSA-PKCS1-V1_5, jsonNormalisation/v1) verifies, as one with SHA-512 does; a
// changed signed label breaks it, and a hash OCM does not offer is refused naming it.
func TestVerifyOCMDefaultSignature(t *testing.T) {
	raw, err := os.ReadFile("testdata/external-facts.json")
	require.NoError(t, err)
	var f struct {
		OCM struct {
			SignDefaults struct {
				Hash          string   `json:"hash"`
				Hashes        []string `json:"hashes"`
				Algorithm     string   `json:"algorithm"`
				Normalization string   `json:"normalization"`
			} `json:"signDefaults"`
		} `json:"ocm"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	d := f.OCM.SignDefaults
	require.Equal(t, HashSHA256, d.Hash)
	require.Contains(t, d.Hashes, HashSHA512)
	require.Equal(t, SignatureAlgorithmRSAPKCS1v5, d.Algorithm)
	require.Equal(t, NormalisationJSONV1, d.Normalization)

	sums := map[string]struct {
		hash crypto.Hash
		sum  func([]byte) []byte
	}{
		HashSHA256: {crypto.SHA256, func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }},
		HashSHA512: {crypto.SHA512, func(b []byte) []byte { s := sha512.Sum512(b); return s[:] }},
	}
	for name, h := range sums {
		a := createSample(t, "ocmdefault", "1.0.0", "registry.example")
		key := newKey(t)
		norm, err := NormaliseWith(a.Descriptor, d.Normalization)
		require.NoError(t, err)
		sum := h.sum(norm)
		sig, err := rsa.SignPKCS1v15(nil, key, h.hash, sum)
		require.NoError(t, err)
		a.Descriptor.Signatures = []Signature{{Name: "ocm",
			Digest:    DigestSpec{HashAlgorithm: name, NormalisationAlgorithm: d.Normalization, Value: hex.EncodeToString(sum)},
			Signature: SignatureSpec{Algorithm: d.Algorithm, Value: hex.EncodeToString(sig), MediaType: MediaTypeRSASignature}}}
		require.NoError(t, a.Verify("ocm", &key.PublicKey), name)
		a.Descriptor.Component.Labels[0].Value = "other"
		assert.True(t, errors.Is(a.Verify("ocm", &key.PublicKey), ErrDigestMismatch), name)
	}

	a := createSample(t, "ocmnodigest", "1.0.0", "registry.example")
	a.Descriptor.Signatures = []Signature{{Name: "ocm",
		Digest:    DigestSpec{HashAlgorithm: "NO-DIGEST", NormalisationAlgorithm: d.Normalization},
		Signature: SignatureSpec{Algorithm: d.Algorithm, Value: "00", MediaType: MediaTypeRSASignature}}}
	err = a.Verify("ocm", &newKey(t).PublicKey)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NO-DIGEST")
}
