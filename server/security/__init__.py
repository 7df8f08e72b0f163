"""Security: TLS and SASL authentication of connections, and the ACL authorizer."""
