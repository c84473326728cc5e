"""The socket server (Kafka's SocketServer): one asyncio server per listener, the connection limits it applies on
accept, the sendfile path for plaintext fetches."""
