// The generated client of the service's page surface (types and client, package access) is built from
// openapi.yaml beside this file by the OpenAPIGenerator build plugin, filtered by openapi-generator-config.yaml.
