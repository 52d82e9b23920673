package engine

// runMemo is what the steps of one run keep for the later steps of the same run. A run is one
// claim of an operation (its steps run one after the other until a wait or the end): seconds.
// Nothing in it decides the operation's future; that is in the operation's data, which is
// durable. A new run, after a wait or a crash, starts with an empty memo and reads anew; so
// does a run that waited in memory (Signals).
type runMemo struct{ m map[string]any }

// Memo returns the value an earlier step of this run kept under key, or calls load and keeps
// what it returns. For a value several steps of a run would read again from a store (the
// provisioner's steps each read the runtime for its kubeconfig): the store is read once a run.
// Outside a run (a step called directly, as unit tests do) it always loads.
func Memo[T, V any](op Operation[T], key string, load func() (V, error)) (V, error) {
	if v, ok := Recall[V](op, key); ok {
		return v, nil
	}
	v, err := load()
	if err == nil {
		Remember(op, key, v)
	}
	return v, err
}

// Recall returns the value a step of this run kept under key, if any (no load: for a value only
// a step of the run can know, such as what an external system answered it).
func Recall[V, T any](op Operation[T], key string) (V, bool) {
	if op.memo != nil {
		if v, ok := op.memo.m[key].(V); ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// Remember keeps v under key for the later steps of this run: a step that has just written a
// value where they would read it (and so knows it) saves them the read.
func Remember[T any](op Operation[T], key string, v any) {
	if op.memo == nil {
		return
	}
	if op.memo.m == nil {
		op.memo.m = map[string]any{}
	}
	op.memo.m[key] = v
}
