// Package encryption encrypts values at rest with AES-256-GCM under a primary key, and decrypts
// values written under the primary or any configured previous key (for key rotation).
package encryption

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

const (
	// formatVersion is the first byte of every ciphertext.
	formatVersion byte = 1
	keySize            = 32
	keyIDSize          = 4
	nonceSize          = 12
	headerSize         = 1 + keyIDSize
)

var (
	// ErrUnknownKey is returned when data was encrypted with a key that is not configured.
	ErrUnknownKey = errors.New("unknown encryption key")
	// ErrDecrypt is returned when data cannot be authenticated: a wrong key or corrupted data.
	ErrDecrypt = errors.New("decryption failed: wrong key or corrupted data")
)

type key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// Keyring encrypts with its primary key and decrypts with the primary or any previous key.
// It is safe for concurrent use.
type Keyring struct {
	primary key
	keys    map[[keyIDSize]byte]key
}

// NewKeyring builds a keyring. Each key is either exactly 32 raw bytes or standard base64 that
// decodes to 32 bytes. Errors name the bad key (primary or previous #n) but never print it.
func NewKeyring(primary string, previous ...string) (*Keyring, error) {
	p, err := parseKey(primary)
	if err != nil {
		return nil, fmt.Errorf("primary encryption key: %w", err)
	}
	kr := &Keyring{primary: p, keys: map[[keyIDSize]byte]key{p.id: p}}
	for i, s := range previous {
		k, err := parseKey(s)
		if err != nil {
			return nil, fmt.Errorf("previous encryption key #%d: %w", i+1, err)
		}
		if _, dup := kr.keys[k.id]; !dup {
			kr.keys[k.id] = k
		}
	}
	return kr, nil
}

// GenerateKey returns a new random 32-byte key, base64 encoded.
func GenerateKey() (string, error) {
	b := make([]byte, keySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating encryption key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func parseKey(s string) (key, error) {
	var raw []byte
	switch {
	case s == "":
		return key{}, errors.New("key is empty; it must be 32 bytes or base64 of 32 bytes")
	case len(s) == keySize:
		raw = []byte(s)
	default:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return key{}, fmt.Errorf("key is %d bytes and not valid base64; it must be 32 bytes or base64 of 32 bytes", len(s))
		}
		if len(b) != keySize {
			return key{}, fmt.Errorf("key decodes from base64 to %d bytes; it must be 32 bytes or base64 of 32 bytes", len(b))
		}
		raw = b
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, fmt.Errorf("creating cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, fmt.Errorf("creating GCM: %w", err)
	}
	sum := sha256.Sum256(raw)
	k := key{aead: aead}
	copy(k.id[:], sum[:keyIDSize])
	return k, nil
}

// PrimaryKeyID is the hex ID of the primary key (safe to log).
func (kr *Keyring) PrimaryKeyID() string { return hex.EncodeToString(kr.primary.id[:]) }

// Encrypt seals plaintext under the primary key:
// version byte | 4-byte key ID | 12-byte nonce | sealed data. The version and key ID are
// authenticated as additional data.
func (kr *Keyring) Encrypt(plaintext []byte) ([]byte, error) {
	out := make([]byte, headerSize+nonceSize, headerSize+nonceSize+len(plaintext)+kr.primary.aead.Overhead())
	out[0] = formatVersion
	copy(out[1:headerSize], kr.primary.id[:])
	if _, err := rand.Read(out[headerSize:]); err != nil {
		return nil, fmt.Errorf("generating nonce: %w", err)
	}
	return kr.primary.aead.Seal(out, out[headerSize:], plaintext, out[:headerSize]), nil
}

// Decrypt opens data sealed by Encrypt under any configured key.
func (kr *Keyring) Decrypt(ciphertext []byte) ([]byte, error) {
	if len(ciphertext) < headerSize+nonceSize {
		return nil, fmt.Errorf("%w: ciphertext too short (%d bytes)", ErrDecrypt, len(ciphertext))
	}
	if ciphertext[0] != formatVersion {
		return nil, fmt.Errorf("%w: unsupported format version %d", ErrDecrypt, ciphertext[0])
	}
	var id [keyIDSize]byte
	copy(id[:], ciphertext[1:headerSize])
	k, ok := kr.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w: data was encrypted with key %s which is not configured; set APP_DATABASE_SECRET_KEY / APP_DATABASE_SECRET_KEYS_PREVIOUS to include it",
			ErrUnknownKey, hex.EncodeToString(id[:]))
	}
	nonce := ciphertext[headerSize : headerSize+nonceSize]
	plain, err := k.aead.Open(nil, nonce, ciphertext[headerSize+nonceSize:], ciphertext[:headerSize])
	if err != nil {
		return nil, fmt.Errorf("%w (key %s)", ErrDecrypt, hex.EncodeToString(id[:]))
	}
	return plain, nil
}

// IsPrimary reports whether ciphertext was written under the primary key (so it needs no
// re-encryption during key rotation).
func (kr *Keyring) IsPrimary(ciphertext []byte) bool {
	return len(ciphertext) >= headerSize && ciphertext[0] == formatVersion &&
		[keyIDSize]byte(ciphertext[1:headerSize]) == kr.primary.id
}
