package encryption

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := GenerateKey()
	require.NoError(t, err)
	return k
}

func TestRoundTrip(t *testing.T) {
	kr, err := NewKeyring(mustKey(t))
	require.NoError(t, err)
	for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("kubeconfig "), 1000)} {
		ct, err := kr.Encrypt(plain)
		require.NoError(t, err)
		assert.True(t, kr.IsPrimary(ct))
		// A short plaintext can appear in random ciphertext bytes by chance; a long one cannot.
		if len(plain) >= 16 {
			assert.False(t, bytes.Contains(ct, plain))
		}
		got, err := kr.Decrypt(ct)
		require.NoError(t, err)
		assert.Equal(t, string(plain), string(got))
	}
}

func TestNonceIsRandom(t *testing.T) {
	kr, err := NewKeyring(mustKey(t))
	require.NoError(t, err)
	a, _ := kr.Encrypt([]byte("same"))
	b, _ := kr.Encrypt([]byte("same"))
	assert.NotEqual(t, a, b)
}

func TestRawKey(t *testing.T) {
	kr, err := NewKeyring("0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	ct, err := kr.Encrypt([]byte("hello"))
	require.NoError(t, err)
	got, err := kr.Decrypt(ct)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
}

func TestBadKeys(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("too short"))
	good := mustKey(t)
	for name, tc := range map[string]struct {
		primary  string
		previous []string
		want     string
	}{
		"empty primary":      {"", nil, "primary encryption key: key is empty"},
		"short raw":          {"abc", nil, "primary encryption key"},
		"31 bytes raw":       {strings.Repeat("a", 31), nil, "primary encryption key"},
		"33 bytes raw":       {strings.Repeat("a", 33), nil, "primary encryption key"},
		"base64 of 9 bytes":  {short, nil, "decodes from base64 to 9 bytes"},
		"bad previous":       {good, []string{good, "nope!"}, "previous encryption key #2"},
		"empty previous":     {good, []string{""}, "previous encryption key #1: key is empty"},
		"base64 of 64 bytes": {base64.StdEncoding.EncodeToString(make([]byte, 64)), nil, "decodes from base64 to 64 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewKeyring(tc.primary, tc.previous...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			for _, k := range append([]string{tc.primary}, tc.previous...) {
				if len(k) > 3 {
					assert.NotContains(t, err.Error(), k, "error must not print the key")
				}
			}
		})
	}
}

func TestWrongKey(t *testing.T) {
	a, _ := NewKeyring(mustKey(t))
	b, _ := NewKeyring(mustKey(t))
	ct, err := a.Encrypt([]byte("secret"))
	require.NoError(t, err)
	_, err = b.Decrypt(ct)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrUnknownKey))
	assert.Contains(t, err.Error(), "data was encrypted with key "+a.PrimaryKeyID()+" which is not configured")
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEY")
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEYS_PREVIOUS")
	assert.False(t, b.IsPrimary(ct))
}

func TestTampering(t *testing.T) {
	kr, _ := NewKeyring(mustKey(t))
	ct, err := kr.Encrypt([]byte("secret value"))
	require.NoError(t, err)
	for i := headerSize; i < len(ct); i++ {
		bad := bytes.Clone(ct)
		bad[i] ^= 0x01
		got, err := kr.Decrypt(bad)
		require.Error(t, err, "byte %d", i)
		assert.True(t, errors.Is(err, ErrDecrypt))
		assert.Contains(t, err.Error(), "wrong key or corrupted data")
		assert.Nil(t, got)
	}
	bad := bytes.Clone(ct)
	bad[0] = 9
	_, err = kr.Decrypt(bad)
	assert.ErrorIs(t, err, ErrDecrypt)
	_, err = kr.Decrypt(ct[:10])
	assert.ErrorIs(t, err, ErrDecrypt)
	_, err = kr.Decrypt(ct[:len(ct)-1])
	assert.ErrorIs(t, err, ErrDecrypt)
}

func TestRotation(t *testing.T) {
	keyA, keyB := mustKey(t), mustKey(t)
	onlyA, _ := NewKeyring(keyA)
	ctA, err := onlyA.Encrypt([]byte("payload"))
	require.NoError(t, err)

	bWithA, err := NewKeyring(keyB, keyA)
	require.NoError(t, err)
	assert.False(t, bWithA.IsPrimary(ctA))
	plain, err := bWithA.Decrypt(ctA)
	require.NoError(t, err)
	ctB, err := bWithA.Encrypt(plain)
	require.NoError(t, err)
	assert.True(t, bWithA.IsPrimary(ctB))

	onlyB, _ := NewKeyring(keyB)
	got, err := onlyB.Decrypt(ctB)
	require.NoError(t, err)
	assert.Equal(t, "payload", string(got))
	_, err = onlyB.Decrypt(ctA)
	assert.ErrorIs(t, err, ErrUnknownKey)
	_, err = onlyA.Decrypt(ctB)
	assert.ErrorIs(t, err, ErrUnknownKey)
}
