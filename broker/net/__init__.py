"""The network room: listeners and connections (``server``), one request in and its answer out
(``dispatch``), what a handler knows of its request (``context``), sendfile/writev of answers
(``socket_writer``), SASL exchanges (``sasl``) and Kafka's connection quotas (``connection_quotas``)."""
