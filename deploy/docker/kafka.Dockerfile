# A single-node Apache Kafka (KRaft) image for machines that reach no image registry: the same
# broker jars deploy/kafka fetches from Maven Central, on the local Debian base (with its JRE),
# configured as the official apache/kafka image is: every KAFKA_* variable is a server property
# (KAFKA_ dropped, lower case, _ -> ., __ -> _, ___ -> -), CLUSTER_ID formats the storage once.
# Built by deploy/docker/build-images.sh, whose context holds libs/, the entrypoint and the
# logging of deploy/kafka.
ARG BASE_IMAGE=gpualloc-local/debian:bookworm
FROM ${BASE_IMAGE}
COPY libs/ /opt/kafka/libs/
COPY kafka-entrypoint.sh /opt/kafka/entrypoint.sh
COPY log4j2.properties /opt/kafka/log4j2.properties
RUN mkdir -p /var/lib/kafka/data && chown -R 10001:10001 /var/lib/kafka && chmod 755 /opt/kafka/entrypoint.sh
USER 10001:10001
EXPOSE 9092
ENTRYPOINT ["/opt/kafka/entrypoint.sh"]
