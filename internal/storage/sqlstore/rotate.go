package sqlstore

import (
	"context"
	"fmt"
)

const rotateBatch = 500

// RotateSecrets re-encrypts, under the primary key, every instance, operation, runtime (its
// kubeconfig too) and binding secret written under another key. Each row is written with compare-and-swap on its old ciphertext (no version
// bump), so a concurrent write of new secrets wins and is not overwritten.
func (s *Store) RotateSecrets(ctx context.Context) (int, error) {
	total := 0
	for _, t := range []struct{ table, id, col string }{{"instances", "instance_id", "secrets"}, {"operations", "id", "secrets"},
		{"runtimes", "id", "secrets"}, {"runtimes", "id", "kubeconfig"}, {"bindings", "id", "secrets"}} {
		n, err := s.rotateTable(ctx, t.table, t.id, t.col)
		total += n
		if err != nil {
			return total, fmt.Errorf("rotating %s of %s (%d rows done): %w", t.col, t.table, total, err)
		}
	}
	return total, nil
}

func (s *Store) rotateTable(ctx context.Context, table, idCol, col string) (int, error) {
	sel := s.d.rebind(fmt.Sprintf("SELECT %[2]s, %[4]s FROM %[1]s WHERE %[4]s IS NOT NULL AND %[2]s > ? ORDER BY %[2]s LIMIT %[3]d", table, idCol, rotateBatch, col))
	upd := s.d.rebind(fmt.Sprintf("UPDATE %[1]s SET %[3]s = ? WHERE %[2]s = ? AND %[3]s = ?", table, idCol, col))
	count, after := 0, ""
	for {
		type row struct {
			ID      string `db:"id"`
			Secrets []byte `db:"secrets"`
		}
		rows, err := s.r.QueryxContext(ctx, sel, after)
		if err != nil {
			return count, err
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.ID, &r.Secrets); err != nil {
				rows.Close()
				return count, err
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return count, err
		}
		for _, r := range batch {
			if s.kr.IsPrimary(r.Secrets) {
				continue
			}
			plain, err := s.kr.Decrypt(r.Secrets)
			if err != nil {
				return count, fmt.Errorf("%s: %w", r.ID, err)
			}
			ct, err := s.kr.Encrypt(plain)
			if err != nil {
				return count, fmt.Errorf("%s: %w", r.ID, err)
			}
			res, err := s.w.ExecContext(ctx, upd, ct, r.ID, r.Secrets)
			if err != nil {
				return count, fmt.Errorf("%s: %w", r.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return count, err
			} else if n > 0 {
				count++
			}
		}
		if len(batch) < rotateBatch {
			return count, nil
		}
		after = batch[len(batch)-1].ID
	}
}
