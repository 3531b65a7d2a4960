"""Who a connection is (principals from TLS certificates and SASL) and what it may do (the authorizer)."""
