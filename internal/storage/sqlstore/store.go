package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/fastjson"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
)

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// Config is what New needs.
type Config struct {
	// DB is used for writes (and for reads when ReadDB is nil). For SQLite it must have a single
	// connection so that writes never overlap.
	DB *sqlx.DB
	// ReadDB, when set, is used for reads.
	ReadDB *sqlx.DB
	// BatchDB, when set, runs the batched statements (SaveProgress's group commit, the batched
	// last_operation reads) and is closed with the store. Their plans do not depend on their
	// parameters (arrays joined to primary keys), so its sessions should plan them once.
	BatchDB *sqlx.DB
	// ClaimDB, when set, runs the claims and is closed with the store. A claim must read the
	// due operations in (due_at, id) order and stop after its few rows, so its sessions should
	// not sort: with statistics behind the table, PostgreSQL read and sorted every active
	// operation per claim (docs/contributor/performance.md).
	ClaimDB *sqlx.DB
	// UnflushedDB, when set, runs the writes whose commit need not wait for its WAL flush
	// (PostgreSQL: sessions with synchronous_commit off), and is closed with the store: the
	// stand-ins' objects, the wakes and the notifications. A stand-in's object is recorded by
	// the save of the operation whose step asked for it, which flushes it too (WAL is flushed
	// in order); lost with the database before that save, the step runs again and finds the
	// stand-in as a system that never got the request. A lost wake costs its operation the
	// next poll. A process killed loses neither: the server has the commit.
	UnflushedDB *sqlx.DB
	// LockLease is how long a singleton lock (TryLock) is held without a renewal, for dialects
	// with LeaseLockSQL [15s]: a holder that hangs loses it to another replica after this long.
	LockLease time.Duration
	Dialect   Dialect
	Keyring   *encryption.Keyring
	Log       logrus.FieldLogger
	// OnClose, when set, runs after the databases are closed.
	OnClose func() error
}

// Store implements storage.Store and its Instances, Operations and Events on database/sql.
type Store struct {
	w         *sqlx.DB
	r         *sqlx.DB
	batch     *sqlx.DB
	claims    *sqlx.DB
	unflushed *sqlx.DB
	// reads, writes, claimed and unflushedWrites are the prepared statements of r, w, claims and
	// unflushed.
	reads, writes, claimed, unflushedWrites *stmtCache
	d                                       Dialect
	kr                                      *encryption.Keyring
	log                                     logrus.FieldLogger
	onClose                                 func() error
	wake                                    broadcaster
	locks                                   localLocks
	lockLease                               time.Duration
	takers                                  takers
	// notifier wakes the other processes (dialects with Notify); id is this store's name in
	// the notifications, so that its own listener ignores them (its subscribers are woken
	// in-process).
	notifier *notifier
	id       string

	// saveProgress is the prepared single-statement SaveProgress (dialects with Array only).
	saveProgressStmt *sqlx.Stmt
	// updateStmt and eventStmt are the prepared transaction form (dialects without Array):
	// parsed once instead of on every step transition.
	updateStmt, eventStmt *sqlx.Stmt
	// saves writes concurrent SaveProgress calls together: with saveBatchStmt (dialects with
	// Array), else in one transaction.
	saves         *coalescer[saveCall, *storage.Operation]
	saveBatchStmt *sqlx.Stmt
	// lastOps reads concurrent named last_operation calls together with lastOpBatchStmt
	// (dialects with Array only).
	lastOps         *coalescer[lastOpCall, storage.LastOperationRead]
	lastOpBatchStmt *sqlx.Stmt
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.Instances  = (*Store)(nil)
	_ storage.Operations = (*Store)(nil)
	_ storage.Events     = (*Store)(nil)
)

// New returns a Store on already migrated databases.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("creating store: no database")
	}
	if cfg.Keyring == nil {
		return nil, errors.New("creating store: no encryption keyring")
	}
	if cfg.Dialect.IsUniqueViolation == nil {
		return nil, errors.New("creating store: dialect has no IsUniqueViolation")
	}
	s := &Store{w: cfg.DB, r: cfg.ReadDB, d: cfg.Dialect, kr: cfg.Keyring, log: cfg.Log, onClose: cfg.OnClose, lockLease: cfg.LockLease}
	if s.lockLease <= 0 {
		s.lockLease = DefaultLockLease
	}
	if s.r == nil {
		s.r = s.w
	}
	if s.batch = cfg.BatchDB; s.batch == nil {
		s.batch = s.w
	}
	if s.claims = cfg.ClaimDB; s.claims == nil {
		s.claims = s.w
	}
	if s.unflushed = cfg.UnflushedDB; s.unflushed == nil {
		s.unflushed = s.w
	}
	s.reads, s.writes, s.claimed, s.unflushedWrites = newStmtCache(s.r), newStmtCache(s.w), newStmtCache(s.claims), newStmtCache(s.unflushed)
	if s.log == nil {
		l := logrus.New()
		l.SetOutput(nopWriter{})
		s.log = l
	}
	if s.d.Array != nil {
		stmt, err := s.w.PreparexContext(ctx, s.d.rebind(saveProgressCTE))
		if err != nil {
			return nil, fmt.Errorf("preparing save progress statement: %w", err)
		}
		s.saveProgressStmt = stmt
		if err := s.startBatcher(ctx); err != nil {
			_ = stmt.Close()
			return nil, err
		}
		if err := s.startLastOpBatcher(ctx); err != nil {
			s.saves.stop()
			_ = s.saveBatchStmt.Close()
			_ = stmt.Close()
			return nil, err
		}
		s.startNotifier()
		return s, nil
	}
	var err error
	if s.updateStmt, err = s.w.PreparexContext(ctx, s.d.rebind(saveProgressUpdate)); err != nil {
		return nil, fmt.Errorf("preparing save progress statement: %w", err)
	}
	if s.eventStmt, err = s.w.PreparexContext(ctx, s.d.rebind(insertEventSQL)); err != nil {
		_ = s.updateStmt.Close()
		return nil, fmt.Errorf("preparing event statement: %w", err)
	}
	s.startTxBatcher()
	s.startNotifier()
	return s, nil
}

// startNotifier starts the notifications of the dialects with Notify.
func (s *Store) startNotifier() {
	if s.d.Notify == "" {
		return
	}
	s.id = uuid.NewString()
	// On the unflushed sessions: a notification is a hint, and the writes it follows are
	// committed already; its own commit need not wait for a WAL flush.
	s.notifier = startNotifier(func(ctx context.Context) error {
		_, err := s.unflushedWrites.exec(ctx, s.d.Notify, s.id)
		return err
	}, notifyPace, s.log)
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// Database implements storage.Store.
func (s *Store) Database() storage.Database {
	return storage.Database{Driver: s.d.Name, Writer: s.w, Unflushed: s.unflushed}
}

// DB is the database used for writes (with the dialect's bind type, so sqlx Rebind works).
func (s *Store) DB() *sqlx.DB { return s.w }

func (s *Store) Instances() storage.Instances   { return s }
func (s *Store) Operations() storage.Operations { return s }
func (s *Store) Events() storage.Events         { return s }

func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("pinging %s database: %w", s.d.Name, err)
	}
	if s.r != s.w {
		if err := s.r.PingContext(ctx); err != nil {
			return fmt.Errorf("pinging %s database (readers): %w", s.d.Name, err)
		}
	}
	return nil
}

// probePayload is larger than a page, so the probe's row needs new pages, as most writes do.
var probePayload = make([]byte, 8192)

func (s *Store) ProbeWrite(ctx context.Context) error {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("probing a write: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO write_probes (id, payload) VALUES (?, ?)`), uuid.NewString(), probePayload); err != nil {
		return fmt.Errorf("probing a write: %w", err)
	}
	return nil
}

func (s *Store) Close() error {
	var errs []error
	if s.notifier != nil {
		s.notifier.close()
	}
	if s.saves != nil {
		s.saves.stop()
	}
	if s.lastOps != nil {
		s.lastOps.stop()
	}
	errs = append(errs, s.reads.close(), s.writes.close(), s.claimed.close(), s.unflushedWrites.close())
	stmts := []*sqlx.Stmt{s.saveProgressStmt, s.updateStmt, s.eventStmt, s.saveBatchStmt, s.lastOpBatchStmt}
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	for _, db := range []*sqlx.DB{s.batch, s.claims, s.unflushed} {
		if db != s.w {
			errs = append(errs, db.Close())
		}
	}
	errs = append(errs, s.w.Close())
	if s.onClose != nil {
		errs = append(errs, s.onClose())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing %s store: %w", s.d.Name, err)
	}
	return nil
}

func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, s.r)
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

func schemaVersion(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	return schemaVersionIn(ctx, q, "schema_migrations")
}

// schemaVersionIn is the highest version recorded in a migration line's table.
func schemaVersionIn(ctx context.Context, q sqlx.QueryerContext, table string) (int, error) {
	var v int
	if err := sqlx.GetContext(ctx, q, &v, "SELECT COALESCE(MAX(version), 0) FROM "+table); err != nil {
		return 0, err
	}
	return v, nil
}

// --- wake-ups ---

// broadcaster fans a signal out to in-process subscribers without blocking.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (b *broadcaster) add(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[chan struct{}]struct{}{}
	}
	b.subs[ch] = struct{}{}
}

func (b *broadcaster) remove(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, ch)
}

func (b *broadcaster) broadcast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		signal(ch)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Wakeups returns a channel (buffer 1, signals coalesce) that receives a value whenever
// operations may have become due: inserted or released in this process, and for dialects with
// Listen, in any process. It is closed when ctx ends.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	var remote <-chan struct{}
	if s.d.Listen != nil {
		var err error
		if remote, err = s.d.Listen(ctx, s.id); err != nil {
			return nil, fmt.Errorf("listening for wake-ups: %w", err)
		}
	}
	ch := make(chan struct{}, 1)
	s.wake.add(ch)
	go func() {
		defer close(ch)
		defer s.wake.remove(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-remote:
				if !ok {
					remote = nil
					continue
				}
				signal(ch)
			}
		}
	}()
	return ch, nil
}

// notify wakes local subscribers and, for dialects with Notify, other processes: after the
// write has committed and in a statement of its own (see notifier), so a notification that
// fails or comes late costs the others their next poll, never the write.
func (s *Store) notify(ctx context.Context) {
	s.wake.broadcast()
	if s.notifier != nil {
		s.notifier.request()
	}
}

// --- secrets ---

func (s *Store) encryptSecrets(sec storage.Secrets) (any, error) {
	if len(sec) == 0 {
		return nil, nil
	}
	plain, err := json.Marshal(sec)
	if err != nil {
		return nil, fmt.Errorf("encoding secrets: %w", err)
	}
	ct, err := s.kr.Encrypt(plain)
	if err != nil {
		return nil, fmt.Errorf("encrypting secrets: %w", err)
	}
	return ct, nil
}

func (s *Store) decryptSecrets(ct []byte) (storage.Secrets, error) {
	if len(ct) == 0 {
		return nil, nil
	}
	plain, err := s.kr.Decrypt(ct)
	if err != nil {
		return nil, fmt.Errorf("decrypting secrets: %w", err)
	}
	var sec storage.Secrets
	if err := fastjson.Unmarshal(plain, &sec); err != nil {
		return nil, fmt.Errorf("decoding secrets: %w", err)
	}
	return sec, nil
}

// --- helpers ---

// preparedRead is the statement of query (built only the first time key is asked for), prepared
// once on the readers: the reads platforms and waits poll would otherwise be parsed per call
// (SQLite re-parsed them every time).
func (s *Store) preparedRead(ctx context.Context, key string, query func() string) (*sqlx.Stmt, error) {
	return s.reads.byName(ctx, key, func() string { return s.d.rebind(query()) })
}

func (s *Store) sb() sq.StatementBuilderType {
	return sq.StatementBuilder.PlaceholderFormat(s.d.Placeholder)
}

// pageBounds validates p and returns LIMIT and OFFSET.
func pageBounds(p storage.Paging) (uint64, uint64, error) {
	page, size := p.Page, p.PageSize
	if page < 0 {
		return 0, 0, fmt.Errorf("invalid Page %d: pages start at 1", page)
	}
	if page == 0 {
		page = 1
	}
	if size < 0 || size > maxPageSize {
		return 0, 0, fmt.Errorf("invalid PageSize %d: must be between 1 and %d (0 for the default %d)", size, maxPageSize, defaultPageSize)
	}
	if size == 0 {
		size = defaultPageSize
	}
	return uint64(size), uint64(page-1) * uint64(size), nil
}

// checkLists refuses (storage.ErrTooManyValues) filter lists whose values together exceed
// storage.MaxListValues, before the driver fails on its variable limit; what names the query.
func checkLists(what string, lens ...int) error {
	n := 0
	for _, l := range lens {
		n += l
	}
	if n > storage.MaxListValues {
		return fmt.Errorf("%s: %d filter values, at most %d: %w", what, n, storage.MaxListValues, storage.ErrTooManyValues)
	}
	return nil
}

func instanceFilterLens(f storage.InstanceFilter) []int {
	return []int{len(f.InstanceIDs), len(f.RuntimeIDs), len(f.GlobalAccountIDs), len(f.SubAccountIDs), len(f.PlanIDs), len(f.Regions)}
}

func eqIfAny[T any](where sq.And, col string, vals []T) sq.And {
	if len(vals) == 0 {
		return where
	}
	return append(where, sq.Eq{col: vals})
}

func (s *Store) count(ctx context.Context, table string, where sq.And) (int, error) {
	q, args, err := s.sb().Select("COUNT(*)").From(table).Where(where).ToSql()
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.r.GetContext(ctx, &n, q, args...); err != nil {
		return 0, err
	}
	return n, nil
}

// pageQuery is one page of a list: the rows of table matching where, in order.
type pageQuery struct {
	table, cols string
	where       sq.And
	order       []string
	paging      storage.Paging
}

// listPage reads a page with scan and how many rows match in all. A page shorter than its size
// that is not past the end already tells the total, which saves the COUNT on the common lists
// (an instance's operations, its events).
func listPage[T any](ctx context.Context, s *Store, pq pageQuery, scan func(rowScanner) (T, error)) (storage.Page[T], error) {
	limit, offset, err := pageBounds(pq.paging)
	if err != nil {
		return storage.Page[T]{}, err
	}
	q, args, err := s.sb().Select(pq.cols).From(pq.table).Where(pq.where).OrderBy(pq.order...).Limit(limit).Offset(offset).ToSql()
	if err != nil {
		return storage.Page[T]{}, err
	}
	rows, err := s.r.QueryxContext(ctx, q, args...)
	if err != nil {
		return storage.Page[T]{}, err
	}
	defer rows.Close()
	out := storage.Page[T]{Items: []T{}}
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return storage.Page[T]{}, err
		}
		out.Items = append(out.Items, item)
	}
	if err := rows.Err(); err != nil {
		return storage.Page[T]{}, err
	}
	n := uint64(len(out.Items))
	if n < limit && (n > 0 || offset == 0) {
		out.TotalCount = int(offset + n)
		return out, nil
	}
	if pq.paging.WithoutTotal {
		out.TotalCount = storage.UnknownTotal
		return out, nil
	}
	if out.TotalCount, err = s.count(ctx, pq.table, pq.where); err != nil {
		return storage.Page[T]{}, err
	}
	return out, nil
}

// exists tells ErrConflict from ErrNotFound after a conditional write matched no row.
func (s *Store) missingOrConflict(ctx context.Context, table, idCol, id string) error {
	var one int
	err := s.w.GetContext(ctx, &one, s.d.rebind("SELECT 1 FROM "+table+" WHERE "+idCol+" = ?"), id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return storage.ErrNotFound
	case err != nil:
		return err
	default:
		return storage.ErrConflict
	}
}

type rowScanner interface {
	Scan(dest ...any) error
}

func rollback(tx *sqlx.Tx) { _ = tx.Rollback() }
