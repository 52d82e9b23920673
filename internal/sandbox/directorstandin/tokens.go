package directorstandin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/google/uuid"
)

// TokenOwner is the runtime, or the application, a one-time token was issued for.
type TokenOwner struct {
	Tenant    string
	RuntimeID string
	// ApplicationID is set instead of RuntimeID for an application's token.
	ApplicationID string
}

// ErrInvalidToken is returned for a one-time token that was never issued, is used, expired or
// belongs to a deleted system auth.
var ErrInvalidToken = errors.New("the one-time token is unknown, already used or expired")

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// issueToken creates a system auth of rec holding a new one-time token, which it returns; only
// its hash is kept. Call it with the lock held.
func (s *StandIn) issueToken(rec *record) string {
	token := newToken()
	s.addToken(rec, token)
	return token
}

// addToken creates a system auth of rec holding token.
func (s *StandIn) addToken(rec *record, token string) {
	rec.tokens++
	auth := SystemAuth{ID: uuid.NewString(), IssuedAt: s.now()}
	rec.auths = append(rec.auths, auth)
	rec.tokenHashes[auth.ID] = hashToken(token)
	s.touch(rec)
}

// forgetAuth drops the token hash of a system auth of rec that is being deleted.
func (s *StandIn) forgetAuth(rec *record, id string) {
	delete(rec.tokenHashes, id)
	s.touch(rec)
}

// RedeemOneTimeToken is how the Connector stand-in accepts a one-time token: it finds the valid
// token's runtime and calls use with it and, with renew, a new one-time token for the same
// runtime (empty without). When use succeeds the token is used up and the new one becomes valid;
// the change is written before it returns. When use fails the token stays valid, the new one
// never does, and use's error is returned.
func (s *StandIn) RedeemOneTimeToken(ctx context.Context, token string, renew bool, use func(owner TokenOwner, next string) error) error {
	var next string
	if renew {
		next = newToken()
	}
	return s.durable.Do(ctx, func() error {
		h := hashToken(token)
		rec, ok := s.byLookup(lookupToken, h)
		if !ok {
			return s.redeemApplicationToken(h, next, use)
		}
		id := ""
		for auth, have := range rec.tokenHashes {
			if have == h {
				id = auth
			}
		}
		i := -1
		for j, a := range rec.auths {
			if a.ID == id {
				i = j
			}
		}
		now := s.now()
		if i < 0 || rec.auths[i].UsedAt != nil || now.Sub(rec.auths[i].IssuedAt) >= OneTimeTokenTTL {
			return ErrInvalidToken
		}
		if err := use(TokenOwner{Tenant: rec.tenant, RuntimeID: rec.id}, next); err != nil {
			return err
		}
		rec.auths[i].UsedAt = &now
		s.touch(rec)
		if renew {
			s.addToken(rec, next)
		}
		return nil
	})
}

// redeemApplicationToken is RedeemOneTimeToken for an application's token of hash h.
func (s *StandIn) redeemApplicationToken(h, next string, use func(owner TokenOwner, next string) error) error {
	a, i := s.applicationToken(h)
	now := s.now()
	if a == nil || a.Tokens[i].UsedAt != nil || now.Sub(a.Tokens[i].IssuedAt) >= OneTimeTokenTTL {
		return ErrInvalidToken
	}
	if err := use(TokenOwner{Tenant: a.App.Tenant, ApplicationID: a.App.ID}, next); err != nil {
		return err
	}
	a.Tokens[i].UsedAt = &now
	if next != "" {
		auth := SystemAuth{ID: uuid.NewString(), IssuedAt: now}
		a.Tokens = append(a.Tokens, auth)
		a.TokenHashes[auth.ID] = hashToken(next)
	}
	s.durable.Touch(kindApplication, a.App.ID)
	return nil
}
