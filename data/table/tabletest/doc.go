// Package tabletest writes the table files tests of several packages need: the hostile Parquet
// files of issue 38 (a kilobyte on disk, gigabytes decoded), for data/table's reader tests and
// for the gotpu command's tests under an address-space limit.
package tabletest
