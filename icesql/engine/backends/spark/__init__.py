"""The Spark backend: the lazy session, its JVM class archive, Spark Connect's drop box."""
