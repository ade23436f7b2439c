// Package netfault is test and measurement equipment: a TCP proxy on loopback (Proxy) that
// cuts, stalls, delays or swallows the replies of the link between an adapter and the service
// it talks to. The adapters' deadline and failover tests and the load check's chaos mode put
// it in front of Redis, MariaDB and RabbitMQ. Nothing in the cardshop binary imports it.
//
// It imports only the standard library.
package netfault
