"""One module per Kafka API, named after it, each registering ``handle(ctx, req)`` for the versions
it serves (``registry``): ApiVersions advertises exactly what is registered here."""
