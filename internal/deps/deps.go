// Package deps pins the module dependencies the skeleton is built on until code imports them.
package deps
import (
 _ "go.temporal.io/sdk/client"
 _ "go.temporal.io/sdk/testsuite"
 _ "github.com/gin-gonic/gin"
 _ "gorm.io/gorm"
 _ "gorm.io/driver/postgres"
 _ "github.com/spf13/viper"
 _ "github.com/spf13/cobra"
 _ "go.uber.org/zap"
 _ "github.com/jackc/pgx/v5"
 _ "github.com/stretchr/testify/require"
 _ "go.uber.org/goleak"
 _ "github.com/google/uuid"
)
