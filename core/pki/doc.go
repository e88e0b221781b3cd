// Package pki is drover's cluster public-key infrastructure: the cluster CA,
// role-bearing certificates, join tokens and the bootstrap exchange that
// turns a join token into a certificate. It does no I/O of its own: callers
// pass the clock, carry the messages over their transport (RPC) and keep the
// serialised CA and tokens in Raft.
//
// # Identities
//
// Every certificate the CA issues names exactly one identity in a URI SAN:
//
//	drover://<cluster-id>/server/<server-name>
//	drover://<cluster-id>/client/<node-id>
//
// The CA certificate carries drover://<cluster-id> and a critical name
// constraint limiting URI SANs to that cluster, so even a certificate signed
// by the right key cannot name another cluster. Host names (DNS and IP SANs)
// are only ever put in server certificates: client join tokens are spread
// to every node, and a client must not be able to pose as a host that HTTPS
// users trust. Authorisation never looks at host names, only at the URI
// (see Trust.PeerIdentity, Identity.RequireServer, Identity.RequireNode).
//
// # Join tokens
//
// A join token is
//
//	DRJT-1-<ca-fingerprint>-<role>-<secret>
//
// with the CA fingerprint as 64 lower-case hex digits (SHA-256 of the CA
// certificate's DER, as CA.Fingerprint prints it), the role as "s"
// (server) or "c" (client), and the secret as 32 random bytes in unpadded
// lower-case base32 (RFC 4648). The fingerprint lets a joiner that knows
// nothing else pin the cluster's CA on its first TLS connection; the secret
// proves the joiner was given the token.
//
// The servers keep the secret itself (in Raft, see Tokens.Marshal), not a
// hash of it, for two reasons: `drover operator join-token` must be able to
// show the token again, and the join proof is a MAC that the server has to
// recompute, which needs the shared key. Keeping a hash would buy nothing:
// Raft, on servers only, also holds the CA private key, which is strictly
// more powerful than any join token. What protects the secret is that it
// never travels: the joiner sends HMAC-SHA256 over a fresh server nonce, its
// CSR and its role, keyed by HKDF-SHA256(secret, salt = CA fingerprint,
// info = "drover join v1 " + role), and only over a TLS connection whose
// server certificate chains to the pinned CA. Tokens are never printed:
// String, GoString, every fmt verb and JSON show a redacted form; Reveal is
// the one way to get the text. Rotating a token replaces its secret, after
// which proofs made with the old one fail.
//
// # The join exchange
//
//  1. The joiner dials any server with PinnedTLSConfig(token): no client
//     certificate, and the server's chain must contain the CA whose
//     fingerprint is in the token and a server-role leaf signed by it.
//  2. The server hands out a Challenge (Challenges.New): a 32-byte nonce,
//     single use, valid for ChallengeTTL (seconds). Challenges live in the
//     memory of the server that issued them, so both steps go to the same
//     server; the table is bounded per caller and in all, a new challenge
//     evicting the oldest, so a flood cannot lock joiners out.
//  3. The joiner sends BuildJoinRequest(token, challenge, key, params).
//  4. The server calls VerifyJoinRequest, which burns the challenge,
//     checks the MAC against its copy of the token for the requested role
//     and the CSR's self-signature, and returns a JoinGrant. It may apply
//     its own policy to the grant (an ID already in use) and then calls
//     CA.IssueJoin, which issues for the role the token grants.
//  5. The joiner checks the answer with CompleteJoin and from then on uses
//     mutual TLS (ServerTLSConfig, ClientTLSConfig) with a CertStore that it
//     refreshes before expiry (CertStore.NeedsRotation, CA.Renew).
package pki
