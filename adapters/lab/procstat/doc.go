// Package procstat is test and measurement equipment: the CPU time a process has used, read
// from /proc/<pid>/stat (Linux). The load check reads the service instances' with it and the
// broker benchmarks RabbitMQ's. Nothing in the cardshop binary imports it.
//
// It imports only the standard library.
package procstat
