package epay

// MinKeyLength is the shortest merchant KEY accepted. Gateways issue 32 characters; a short
// one is a placeholder or a typo, and MD5 signatures with it can be forged by guessing.
const MinKeyLength = 16
