// Package durable is the stand-ins' persistence library: a stand-in keeps its objects in a Store
// (in memory, or the database through durablesql) through Durable, which commits each request's
// changes in groups before the answer goes out, with Tables of objects behind a bounded cache,
// lookups by secondary keys, a Bloom filter of the keys that exist, and tallies of calls.
package durable
